import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * The modules a module loads when it is evaluated, followed from file to file: its value imports and re-exports.
 * Type-only imports and `require()` calls made later are not loads at evaluation. Files are repo-relative; a
 * package is its name.
 */
export function staticImportGraph(root: string, entry: string): { files: string[]; packages: string[] } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    if (!file.endsWith('.ts')) return;
    const source = ts.createSourceFile(file, readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.Latest);
    for (const specifier of valueImports(source)) {
      if (!specifier.startsWith('.')) {
        packages.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!);
        continue;
      }
      const base = path.join(path.dirname(file), specifier);
      visit(specifier.endsWith('.json') ? base : `${base}.ts`);
    }
  };
  visit(entry);
  return { files: [...files].sort(), packages: [...packages].sort() };
}

function valueImports(source: ts.SourceFile): string[] {
  const out: string[] = [];
  for (const s of source.statements) {
    if (ts.isImportDeclaration(s) && ts.isStringLiteral(s.moduleSpecifier)) {
      const clause = s.importClause;
      const named = clause?.namedBindings;
      const typeOnly =
        clause &&
        (clause.isTypeOnly ||
          (!clause.name && named && ts.isNamedImports(named) && named.elements.every((e) => e.isTypeOnly)));
      if (!typeOnly) out.push(s.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(s) && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier)) {
      const named = s.exportClause;
      const typeOnly = s.isTypeOnly || (named && ts.isNamedExports(named) && named.elements.every((e) => e.isTypeOnly));
      if (!typeOnly) out.push(s.moduleSpecifier.text);
    }
  }
  return out;
}

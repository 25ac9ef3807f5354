import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The operator console, built to static files that Keel's API serves at /console/ under a Content-Security-Policy of
 * 'self' only for scripts, styles and fonts. So nothing is inlined: no module-preload polyfill, no asset as a data:
 * URL, and the page's one script and one stylesheet are files.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  publicDir: false,
  // Always a production build, also when started under NODE_ENV=test (the test suite's): Vite would otherwise compile
  // JSX for React's development runtime, which its production build does not have, and bundle React's development
  // build.
  esbuild: { jsx: 'automatic', jsxDev: false },
  define: { 'process.env.NODE_ENV': JSON.stringify('production') },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    cssCodeSplit: false,
  },
});

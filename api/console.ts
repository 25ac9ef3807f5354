import { access } from 'node:fs/promises';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import { errorBody } from './errors';

/** Where `npm run build:console` (and scripts/console-build.ts) writes the console. */
export const CONSOLE_DIST = path.join(__dirname, '..', 'console', 'dist');

/**
 * The console runs only its own files: no inline script or style, no other origin, and it cannot be framed. Text from
 * agents and tools is rendered as text by the page; this is the second line if that ever failed.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const NOT_BUILT = 'the console is not built: run npm run build:console';

/** Hashed file names change with their content, so they may be kept; index.html names them and is asked again. */
const cacheControl = (file: string) =>
  file.split(path.sep).includes('assets') ? 'public, max-age=31536000, immutable' : 'no-cache';

/**
 * The operator console at /console/ (register with prefix /console): the static files Vite built, and config.json
 * for its links to the Temporal UI. The files need no token; the page signs in to the API itself.
 */
export function consoleRoutes(deps: {
  distDir: string;
  temporalUiUrl: string | null;
  namespace: string;
}): FastifyPluginAsync {
  const index = path.join(deps.distDir, 'index.html');
  return async (app) => {
    // Every answer under /console carries the headers, errors and redirects included.
    app.addHook('onSend', async (_req, reply) => void reply.headers(SECURITY_HEADERS));
    // Checked on each request: a console built while the API runs is served without a restart.
    app.addHook('onRequest', async (req, reply) => {
      const url = req.url.split('?')[0];
      if (url === '/console' || url === '/console/config.json') return;
      const built = await access(index).then(
        () => true,
        () => false,
      );
      if (!built) await reply.status(503).send(errorBody('unavailable', NOT_BUILT));
    });
    app.setNotFoundHandler((req, reply) =>
      reply.status(404).send(errorBody('not_found', `no file ${req.url.split('?')[0]} in the console`)),
    );

    // The console's address is /console/, its index; without the slash is the same place.
    app.get('', { schema: { hide: true } }, (_req, reply) => reply.redirect('/console/', 301));
    app.get('/config.json', { schema: { hide: true } }, async (_req, reply) =>
      reply.header('cache-control', 'no-cache').send({ temporalUiUrl: deps.temporalUiUrl, namespace: deps.namespace }),
    );
    await app.register(fastifyStatic, {
      root: deps.distDir,
      prefix: '/',
      index: ['index.html'],
      decorateReply: false,
      dotfiles: 'deny',
      cacheControl: false,
      setHeaders: (reply, file) => void reply.header('cache-control', cacheControl(file)),
      // A missing folder is the not-built case, answered above.
      suppressWarning: true,
    });
  };
}

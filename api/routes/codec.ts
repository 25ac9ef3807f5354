import cors from '@fastify/cors';
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { decodeWith, encodeWith } from '../../services/payload-encryption';
import { CODEC_COOKIE } from '../auth';
import { ApiError } from '../errors';

/** A payload as Temporal's codec protocol writes it: proto JSON, every byte value in base64. */
const JsonPayload = z.object({
  metadata: z.record(z.string(), z.string().base64()).nullish(),
  data: z.string().base64().nullish(),
});
const Payloads = z.object({ payloads: z.array(JsonPayload).max(10_000) });
type JsonPayload = z.infer<typeof JsonPayload>;
/** What the codec session routes did: the cookie set (or none: no bearer token, as without tokens), or cleared. */
const Session = z.object({ cookie: z.enum(['set', 'none', 'cleared']) });

const fromJson = (p: JsonPayload): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const toJson = (p: Payload): JsonPayload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? []).toString('base64')]),
  ),
  data: Buffer.from(p.data ?? []).toString('base64'),
});

export interface CodecDeps {
  /** The API's own payload codecs (services/payload-encryption.ts): none when payloads are clear. */
  codecs: readonly PayloadCodec[];
  /** The Temporal Web UI's origin, the only one a browser may call from (KEEL_TEMPORAL_UI_URL); none when unset. */
  uiOrigin: string | null;
}

/**
 * The codec server Temporal's Web UI and CLI call (`--codec-endpoint <api>/codec`): POST /codec/decode and
 * /codec/encode, for operators' tokens. A browser may call it from the Temporal UI's origin only; the UI sends no
 * bearer token, so an operator's console sign-in leaves the token in an HttpOnly cookie scoped to /codec
 * (POST /codec/session), which the UI sends with "include credentials".
 */
export function codecRoutes(deps: CodecDeps): FastifyPluginAsyncZod {
  const decode = (payloads: Payload[]) => decodeWith(deps.codecs, payloads);
  const encode = (payloads: Payload[]) => encodeWith(deps.codecs, payloads);
  return async (app) => {
    await app.register(cors, {
      origin: deps.uiOrigin ?? false,
      credentials: true,
      methods: ['POST', 'DELETE'],
      allowedHeaders: ['content-type', 'x-namespace', 'authorization'],
    });
    for (const [op, run] of [
      ['decode', decode],
      ['encode', encode],
    ] as const) {
      app.post(
        `/codec/${op}`,
        {
          schema: {
            tags: ['codec'],
            operationId: `${op}Payloads`,
            summary: `Temporal's codec protocol: ${op}s payloads with Keel's payload keys (operators only)`,
            body: Payloads,
            response: { 200: Payloads },
          },
        },
        async (req) => {
          // A payload sealed with a key this API lacks, or not a sealed payload at all, is the caller's to fix.
          const done = await run(req.body.payloads.map(fromJson)).catch((err: unknown) => {
            throw new ApiError(
              400,
              'invalid_payload',
              `cannot ${op}: ${err instanceof Error ? err.message : String(err)}`,
            );
          });
          return { payloads: done.map(toJson) };
        },
      );
    }
    app.post(
      '/codec/session',
      {
        schema: {
          tags: ['codec'],
          operationId: 'startCodecSession',
          summary: "Keeps the operator's token in an HttpOnly cookie for the Temporal UI's codec calls",
          response: { 200: Session },
        },
      },
      async (req, reply) => {
        const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
        if (token)
          void reply.setCookie(CODEC_COOKIE, token, {
            path: '/codec',
            httpOnly: true,
            sameSite: 'strict',
            secure: req.protocol === 'https',
          });
        return reply.send({ cookie: token ? 'set' : 'none' });
      },
    );
    app.delete(
      '/codec/session',
      {
        schema: {
          tags: ['codec'],
          operationId: 'endCodecSession',
          summary: 'Forgets the codec cookie',
          response: { 200: Session },
        },
      },
      async (_req, reply) => reply.clearCookie(CODEC_COOKIE, { path: '/codec' }).send({ cookie: 'cleared' }),
    );
  };
}

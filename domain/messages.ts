import { z } from 'zod';
import { Delivery } from './delivery';
import { LIMITS } from './limits';
import { NOT_BLANK, storableString } from './text';

export const MESSAGE_MODES = ['queue', 'steer', 'interrupt'] as const;
export type MessageMode = (typeof MESSAGE_MODES)[number];

export function utf8Bytes(text: string): number {
  // Pure and sandbox-safe (no Buffer / TextEncoder needed in workflow code).
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3; // BMP characters, and lone surrogates (encoded as U+FFFD)
  }
  return bytes;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** zod issue param that the API maps to 413 text_too_large instead of 400. */
export const TEXT_TOO_LARGE = 'text_too_large';

export const MessageText = storableString()
  .regex(NOT_BLANK, 'text must not be empty')
  .refine((t) => utf8Bytes(t) <= LIMITS.messageTextBytes, {
    message: `text must be at most ${LIMITS.messageTextBytes} UTF-8 bytes`,
    params: { keelCode: TEXT_TOO_LARGE },
  });

export const MessageId = storableString()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

/** The body of POST .../messages, and the argument of the `submitMessage` Update (after defaults). */
export const SubmitMessageBody = z
  .object({
    text: MessageText,
    messageId: MessageId.optional(),
    author: storableString().min(1).max(200).optional(),
    mode: z.enum(MESSAGE_MODES).optional(),
    delivery: Delivery.optional(),
  })
  .strict();
export type SubmitMessageBody = z.infer<typeof SubmitMessageBody>;

/** What the conversation workflow receives: the API fills in messageId and mode. */
export interface InboundMessage {
  messageId: string;
  text: string;
  author?: string;
  mode: MessageMode;
  delivery?: Delivery;
  /** Set by Keel itself, never by the API: the workflow id told when this message's turn ends (a job's run). */
  notify?: string;
}

/** Throws a readable error when an inbound message breaks a rule; used by the Update validator. */
export function assertValidInbound(msg: InboundMessage): void {
  const { notify, ...body } = msg;
  const isWorkflowId = typeof notify === 'string' && notify.length > 0 && notify.length <= LIMITS.workflowIdChars;
  if (notify !== undefined && !isWorkflowId) throw new Error('invalid message: notify must be a workflow id');
  const parsed = SubmitMessageBody.safeParse(body);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`invalid message: ${first ? `${first.path.join('.') || 'body'}: ${first.message}` : 'unknown'}`);
  }
  if (!msg.messageId) throw new Error('invalid message: messageId is required');
}

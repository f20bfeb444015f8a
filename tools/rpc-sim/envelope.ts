/** JSON-RPC 2.0 parsing and error answers for the simulator's HTTP and websocket sides. */

/** One request (or batch element), as received. */
export interface Envelope {
  method: string;
  params: unknown;
  /** Without an `id` it is a notification: no answer. */
  hasId: boolean;
  id: unknown;
  /** Why it is not a valid request, if not. */
  invalid?: string;
}

/** A parsed request body: one request, a batch, or text that is not JSON. */
export type Body = { kind: 'unparsable' } | { kind: 'single' | 'batch'; elements: Envelope[] };

/** Parses an HTTP body or websocket frame. */
export function parseBody(text: string): Body {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'unparsable' };
  }
  if (Array.isArray(value)) return { kind: 'batch', elements: value.map(toEnvelope) };
  return { kind: 'single', elements: [toEnvelope(value)] };
}

function toEnvelope(value: unknown): Envelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { method: '', params: undefined, hasId: false, id: null, invalid: 'Invalid request' };
  }
  const obj = value as Record<string, unknown>;
  const method = typeof obj.method === 'string' ? obj.method : '';
  const envelope: Envelope = { method, params: obj.params, hasId: 'id' in obj, id: obj.id };
  const id = obj.id;
  if (obj.jsonrpc !== '2.0') envelope.invalid = 'Invalid request: jsonrpc must be "2.0"';
  else if (typeof obj.method !== 'string') envelope.invalid = 'Invalid request: missing method';
  else if (envelope.hasId && id !== null && typeof id !== 'string' && typeof id !== 'number') {
    envelope.invalid = 'Invalid request: id must be a string, number or null';
  }
  return envelope;
}

/** The request's id if a string or number, else null. */
export function validId(id: unknown): string | number | null {
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** A JSON-RPC error answer; `data` omitted when undefined. */
export function errorJson(id: unknown, code: number, message: string, data?: unknown): string {
  const error = data === undefined ? { code, message } : { code, message, data };
  return JSON.stringify({ jsonrpc: '2.0', error, id: validId(id) });
}

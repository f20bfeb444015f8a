import { Type } from '@fastify/type-provider-typebox';

/** `{ s: "error", result: "<short text>" }`, the error envelope (DESIGN.md, "Endpoints"). */
export const errorEnvelopeSchema = Type.Object({ s: Type.Literal('error'), result: Type.String() });

import { Type } from '@fastify/type-provider-typebox';

/**
 * `{ s: "error", result: "<short text>", detail?: "<what was wrong>" }`, the error envelope
 * (README, "Routes"): `result` is the contract's text, `detail` an explanation for people.
 */
export const errorEnvelopeSchema = Type.Object({
  s: Type.Literal('error'),
  result: Type.String(),
  detail: Type.Optional(
    Type.String({ description: 'What was wrong and what is accepted (for people, not parsing)' }),
  ),
});

import { BudgetExhaustedError, RateLimitedError } from '../../core/errors.js';
import type { CreditBudget } from '../../core/rpc/budget.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { Requester } from './lookup.js';

/**
 * Charges a new refresh to `requester`: a unit of its cold-miss limit, then, on the configured
 * endpoint with a budget, a look at its share of the day's credits (docs/design.md, "Budget").
 *
 * @throws RateLimitedError past the limit, or with the share spent (to the next UTC day).
 */
export async function chargeRefresh(
  endpoint: RpcEndpoint,
  requester: Requester,
  budget: CreditBudget | undefined,
): Promise<void> {
  await requester.charge();
  if (endpoint.kind !== 'default' || budget?.creditsPerDay === undefined) return;
  let spent: boolean;
  try {
    spent = await budget.clientShareSpent(requester.client);
  } catch {
    // The worker's reservation holds the share exactly; a failed look refuses nothing.
    return;
  }
  if (spent) throw shareSpent(budget);
}

/** The 429 of a client that spent its share of the day's credits. */
export function shareSpent(budget: CreditBudget | undefined): RateLimitedError {
  return new RateLimitedError(
    "client spent its share of the day's credits",
    budget?.retryAfterSeconds() ?? 60,
    {
      reason: 'client_share',
      detail:
        "this client spent its share of the gateway's daily RPC credits: cached answers are still served, new refreshes from the next UTC day (Retry-After)",
    },
  );
}

/** The 503 of a cold miss of `parent` the day's credit budget cannot pay for. */
export function budgetSpent(
  parent: string,
  budget: CreditBudget | undefined,
): BudgetExhaustedError {
  return new BudgetExhaustedError(
    `no refresh of ${parent}: the daily credit budget is spent`,
    budget?.retryAfterSeconds() ?? 60,
    {
      detail:
        "the gateway's daily RPC credit budget is spent: cached answers are still served, new ones from the next UTC day (Retry-After)",
    },
  );
}

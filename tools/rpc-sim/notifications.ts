/**
 * The pubsub websocket's notifications: which subscriptions a chain write or a transaction
 * reaches, and the text a node sends each (agave's rpc_pubsub wire format).
 */
import { NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { accountJson, closedAccountJson } from './account-json.js';
import type { AccountWrite } from './chain-view.js';
import type { Subscription, SubscriptionIndex } from './subscriptions.js';
import type { SimTransaction } from './transactions.js';

/** Sends a notification's text to its subscription's socket; true if it went out. */
export type Deliver = (sub: Subscription, text: string) => boolean;

/**
 * Notifies a write: accountSubscribe hears every write (deletion as a closed account);
 * programSubscribe only accounts owned and passing the filters after the write, so never a
 * deletion, as on a real node. Returns the notifications delivered.
 */
export function notifyWrite(
  index: SubscriptionIndex,
  write: AccountWrite,
  deliver: Deliver,
): number {
  let sent = 0;
  const accountSubs = index.ofAccount(write.key);
  if (accountSubs) {
    for (const sub of accountSubs) {
      const { encoding, dataSlice } = sub.params;
      const value = write.account
        ? accountJson(write.account, encoding, dataSlice, 'placeholder')
        : closedAccountJson(encoding);
      if (deliver(sub, notificationText(sub.id, 'accountNotification', write.slot, value))) sent++;
    }
  }
  const account = write.account;
  const programSubs = account && index.ofProgram(account.ownerKey);
  if (!programSubs) return sent;
  for (const sub of programSubs) {
    const { encoding, dataSlice, filters } = sub.params;
    if (!filters.every((filter) => filter(account.data))) continue;
    const value = `{"pubkey":"${account.key}","account":${accountJson(account, encoding, dataSlice, 'placeholder')}}`;
    if (deliver(sub, notificationText(sub.id, 'programNotification', write.slot, value))) sent++;
  }
  return sent;
}

/**
 * Notifies a transaction: a logsNotification per passing subscription (`mentions`: any key).
 * Returns the notifications delivered.
 */
export function notifyLogs(index: SubscriptionIndex, tx: SimTransaction, deliver: Deliver): number {
  if (index.logs.size === 0) return 0;
  let sent = 0;
  let value: string | undefined;
  for (const sub of index.logs) {
    const { mentions } = sub.params;
    if (mentions !== undefined && !tx.mentions(mentions)) continue;
    value ??= JSON.stringify({ signature: tx.signature, err: tx.err, logs: tx.logs });
    if (deliver(sub, notificationText(sub.id, 'logsNotification', tx.slot, value))) sent++;
  }
  return sent;
}

/** A notification of subscription `id`: `value` (JSON text) in the context of `slot`. */
function notificationText(
  id: number,
  method: string,
  slot: number | string,
  value: string,
): string {
  return (
    `{"jsonrpc":"2.0","method":"${method}","params":{"result":{"context":{"slot":${slot}},` +
    `"value":${value}},"subscription":${id}}}`
  );
}

/**
 * A node's `programNotification` for `sendRaw`/`flood`; `slot` goes in unquoted as written
 * (`'1e309'`, `'-1'`; quoted: `'"5"'`), `data` already sliced (base64), `owner` default the name
 * program.
 */
export function programNotificationText(
  subscription: number,
  slot: number | string,
  pubkey: string,
  data: Uint8Array,
  owner = NAME_PROGRAM_ID.toBase58(),
): string {
  const encoded = Buffer.from(data).toString('base64');
  const value =
    `{"pubkey":"${pubkey}","account":{"data":["${encoded}","base64"],"executable":false,` +
    `"lamports":1,"owner":"${owner}","rentEpoch":0,"space":${data.length}}}`;
  return notificationText(subscription, 'programNotification', slot, value);
}

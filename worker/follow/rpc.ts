/**
 * The RPC calls the follower makes besides its websocket, as an interface: the units take it, the
 * runtime passes {@link import('./lane-rpc.js').laneRpc} (the configured endpoint's client, costs
 * counted there), tests pass fakes.
 */
export interface FollowRpc {
  /**
   * `getSlot` at `confirmed`, observed by the worker's slot clock: a worker that has not anchored
   * its clock yet (two replies that agree) believes no notification's slot, so a new owner asks
   * until it has (2 credits, once per process).
   *
   * @throws RpcCallError when the call fails.
   */
  slot(): Promise<void>;
  /**
   * `getTransaction(signature, {encoding: 'json', maxSupportedTransactionVersion: 0, commitment:
   * 'confirmed'})`: the result as the RPC sent it, null when the node has not seen it (yet).
   *
   * @throws RpcCallError when the call fails (the client's retries spent).
   */
  transaction(signature: string): Promise<unknown>;
  /**
   * `getSignaturesForAddress(name program, {until, before, limit, minContextSlot})`, newest first
   * (`before`: older than that signature, the next page). With
   * `minContextSlot` a node behind that slot answers -32016, retried by the client.
   *
   * @throws RpcCallError when the call fails.
   */
  signatures(opts: {
    until?: string;
    before?: string;
    limit: number;
    minContextSlot?: number;
  }): Promise<Array<{ signature: string; slot: number; failed: boolean }>>;
  /**
   * `getMultipleAccounts(keys)` sliced to the stream's head (bytes 0..130), 100 keys a call: each
   * account's program owner and head, null when it does not exist; the lowest slot the replies
   * read at (undefined when one is missing or not believed). Null means the node answered that
   * key with null in a list of one entry per key: a reply of any other shape is refused, so a
   * short or empty answer never reads as "gone".
   *
   * With `whole`, each account is read up to a reverse record's longest text (the header, the
   * length and the lane's longest label) instead of the head: a reverse text the head cut. With
   * `minContextSlot`, read at that slot or later (a node behind refuses, and the call is retried).
   *
   * @throws RpcCallError when a call fails, or (final) when a reply is not one account or null
   *   per key.
   */
  accounts(
    keys: readonly string[],
    opts?: { whole?: boolean; minContextSlot?: number },
  ): Promise<{
    slot: number | undefined;
    accounts: Array<{ owner: string; head: Buffer } | null>;
  }>;
}

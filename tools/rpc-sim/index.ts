/** Loopback Solana JSON-RPC simulator for tests and local runs; the API is in server.ts. */
export { SimChain } from './chain.js';
export type { AddDomainOptions, AddSubdomainOptions, DeleteOptions } from './chain.js';
export type { SimChainOptions } from './account-store.js';
export type {
  AccountWrite,
  ChainView,
  MemcmpHint,
  SimAccount,
  SimAccountInput,
  TransactionListener,
  WriteListener,
} from './chain-view.js';
export {
  DEFAULT_DOMAIN_SPACE,
  DEFAULT_SIM_OWNER,
  DEFAULT_SUBDOMAIN_SPACE,
  NAME_HEADER_LEN,
  ZERO_KEY,
  encodeNameAccount,
  encodeReverseData,
  rentExemptLamports,
} from './name-layout.js';
export type { NameHeader, SubdomainKeys } from './name-layout.js';
export { DEFAULT_MAX_TRANSACTIONS } from './transaction-log.js';
export { startBackgroundWrites } from './background.js';
export type { BackgroundWriteOptions, BackgroundWriter } from './background.js';
export { LAMPORTS_PER_SIGNATURE } from './transactions.js';
export type { SimInstruction, SimTransaction } from './transactions.js';
export { NAME_INSTRUCTION_LOG, NAME_INSTRUCTION_TAG } from './instructions.js';
export { FINALIZED_DEPTH, transactionJson } from './transaction-json.js';
export type { TransactionEncoding } from './transaction-json.js';
export { DEMO_DOMAINS, demoLabels, seedDemoChain } from './demo.js';
export { SDK_DERIVATION, seedRegistry, seededRandom } from './registry.js';
export type { RegistryDerivation, RegistryOptions, SeededRegistry } from './registry.js';
export type { DemoDomain, SeededDomain } from './demo.js';
export { GARBAGE_BODY } from './faults.js';
export type { Fault, FaultKind, FaultScope } from './faults.js';
export {
  DEFAULT_V2_LIMIT,
  MAX_BASE58_BYTES,
  MAX_FILTERS,
  MAX_MULTIPLE_ACCOUNTS,
  MAX_SIGNATURES_LIMIT,
  MAX_V2_LIMIT,
  SIM_SOLANA_VERSION,
} from './limits.js';
export { SIM_ONLY_METHODS, SUPPORTED_METHODS } from './methods.js';
export { RpcErrorCode } from './rpc-error.js';
export { FLOOD_BUFFER_BYTES } from './pubsub.js';
export type { WsCallRecord, WsStats } from './pubsub.js';
export { programNotificationText } from './notifications.js';
export type { SubscriptionKind } from './subscriptions.js';
export { startRpcSimulator } from './server.js';
export { DEFAULT_MAX_BODY_BYTES } from './simulator-api.js';
export type { RpcCallRecord, RpcSimulator, RpcSimulatorOptions } from './simulator-api.js';

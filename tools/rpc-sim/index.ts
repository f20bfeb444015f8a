/** Loopback Solana JSON-RPC simulator for tests and local runs; the API is in server.ts. */
export {
  DEFAULT_DOMAIN_SPACE,
  DEFAULT_MAX_TRANSACTIONS,
  DEFAULT_SIM_OWNER,
  DEFAULT_SUBDOMAIN_SPACE,
  NAME_HEADER_LEN,
  SimChain,
  ZERO_KEY,
  encodeNameAccount,
  encodeReverseData,
  rentExemptLamports,
} from './chain.js';
export type {
  AccountWrite,
  AddDomainOptions,
  AddSubdomainOptions,
  ChainView,
  DeleteOptions,
  MemcmpHint,
  NameHeader,
  SimAccount,
  SimAccountInput,
  SimChainOptions,
  SubdomainKeys,
  TransactionListener,
  WriteListener,
} from './chain.js';
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
export { FLOOD_BUFFER_BYTES, programNotificationText } from './pubsub.js';
export type { SubscriptionKind, WsCallRecord, WsStats } from './pubsub.js';
export { startRpcSimulator } from './server.js';
export { DEFAULT_MAX_BODY_BYTES } from './simulator-api.js';
export type { RpcCallRecord, RpcSimulator, RpcSimulatorOptions } from './simulator-api.js';

/**
 * @gpumem/allocator-core: the Allocator interface, statistics, typed errors, the registry, devices
 * and streams, the native loader, and the 'cuda', 'host' and 'plugin' strategies (registered on import;
 * 'native' is the deprecated alias of 'plugin').
 * @packageDocumentation
 */
import './register.js';

export type {
  Allocator,
  AllocatorStats,
  DevicePtr,
  PrefetchTarget,
  AllocationAction,
  AllocationEvent,
  TrackingEvent,
  SleepRequest,
  SleepReport,
  SleepingAllocator,
  TagStats,
} from './types.js';
export { withTag, currentTag } from './tags.js';
export { BaseAllocator } from './base.js';
export {
  NativeAllocator,
  type NativeLayerOptions,
  type FaultInjectionOptions,
  type SharedAllocatorHandle,
  type NativeStrategySpec,
  nativeLayerOptions,
} from './native-allocator.js';
export {
  defineNativeStrategy,
  deviceOption,
  peerAccessEntry,
  NativeStrategyAllocator,
  type EntriesOf,
  type PlacementOf,
  type NativeStrategy,
  type NativeStrategyDescriptor,
  type NativeStrategyEntries,
  type NativeStrategyFlags,
  type ResolvedPlacement,
} from './native-strategy.js';
export {
  defineOptions,
  option,
  type OptionSpec,
  type OptionExtras,
  type OptionEntries,
  type OptionsDefinition,
  type OptionsOf,
  type OptionValues,
  type ParsedOptions,
} from './options.js';
export { attachSharedAllocator, AttachedAllocator } from './shared.js';
export { TrackingAllocator, createTrackedAllocator, type TrackedAllocator, type TrackingEvents } from './adaptors/tracking.js';
export { OutputFile, OutputFileError, writeOutputFile, outputTarget, isSameFile, checkPathName, type OutputTarget } from './output-file.js';
export { nonRegularFileKind, type FileKindStats } from './file-kind.js';
export { OutOfMemoryError, CudaError, InvalidStateError, isOutOfMemory, describeMemory, translateNativeError } from './errors.js';
export { AllocatorAdaptor, type AdaptorOptions } from './adaptors/adaptor.js';
export { LimitingAdaptor, ByteBudget } from './adaptors/limiting.js';
export {
  registerAllocator,
  registerDeprecatedAlias,
  createAllocator,
  createAllocatorWrappingLeaves,
  listAllocators,
  hasAllocator,
  strategyInfo,
  checkAllocatorOptions,
  strategyLabel,
  type AllocatorOptionsMap,
  type AllocatorFlagsMap,
  type AllocatorFor,
  type AllocatorFactory,
  type FactoryFor,
  type StrategyInfo,
  type StrategyRegistration,
} from './registry.js';
export type { StrategyFlags } from './flags.generated.js';
export {
  hostDevice,
  cudaDevice,
  deviceCount,
  deviceStatus,
  explainNoDevice,
  hasCudaDevice,
  deviceProperties,
  memoryInfo,
  synchronizeDevice,
  type Device,
  type DeviceProperties,
} from './device.js';
export {
  peerTopology,
  peerPair,
  peerCell,
  formatPeerMatrix,
  type PeerTopology,
  type PeerPair,
  type PeerLink,
} from './topology.js';
export { checkPeerAccess, peerAccessOption, peerAccessSpec, type PeerAccessProbe } from './peer-access.js';
export { Stream, CudaEvent, CudaGraph } from './stream.js';
export {
  loadNative,
  loadNativeFrom,
  addonCandidates,
  prebuildTag,
  platformPackage,
  type Prebuilds,
  NativeLoadError,
  type NativeLoadErrorCode,
  type ResourceSpec,
  type ChainSpec,
  type NativeTools,
  type NativeAddon,
  type NativeResource,
  type NativeStats,
  type NativeTiming,
  type NativeReplay,
  type NativeReplayPass,
  type NativeTrackingEvents,
  type NativeDeviceProperties,
  type NativeKernelImage,
  type NativeNcclLibrary,
  type NativePeerTopology,
  type NativePeerPair,
  nativeAddonPart,
} from './native.js';
export type { NativeLinkBench, NativeLinkBenchOptions, NativeLinkMeasurement } from './tools.js';
export { CudaAllocator, type CudaAllocatorOptions } from './strategies/cuda.js';
export { HostAllocator, type HostAllocatorOptions } from './strategies/host.js';
export {
  PluginAllocator,
  NativePluginAllocator,
  pluginOptionString,
  pluginLibraryPath,
  type PluginAllocatorOptions,
  type NativeAllocatorOptions,
  type PluginOptionValues,
  type NativePluginOptionValues,
} from './strategies/plugin.js';
export { checkBytes, checkNonNegative, checkPointer, checkBoolean, checkOneOf, checkOptionKeys, describeValue } from './validate.js';
export { parseSize, sizeForms } from './sizes.js';
export { systemInfo, formatSystemInfo, type SystemInfo } from './info.js';
export { formatBytes, formatMs } from './format.js';
export { escapeTerminal, escapeTerminalLines } from './terminal.js';
export { median, quantile } from './numbers.js';
export { resolvePlacement, definedOptions, type MemoryPlacement } from './placement.js';

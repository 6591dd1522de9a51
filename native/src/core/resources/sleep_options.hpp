// The options of sleep's host backups (a private header): every strategy that sleeps ('expandable',
// 'tiered') keeps its backups in the same engine, so their descriptors list the same two options.
#pragma once
#include <vector>

#include "gpumem/strategy_options.hpp"

namespace gpumem {

// backupLimitBytes and backupReserveBytes over a strategy's options member `Options`
// (&expandable_spec::options) and that struct's fields `Limit` and `Reserve`.
template <auto Options, auto Limit, auto Reserve>
std::vector<option_descriptor> sleep_backup_options() {
  return {
      bytes_option<Options, Limit>(
          "backupLimitBytes",
          "host bytes the backups of sleeping tags may hold (unset: MemAvailable less 10% of MemTotal at each sleep)")
          .js_only(),
      bytes_option<Options, Reserve>(
          "backupReserveBytes", "host bytes pinned for sleep's backups ahead of the first sleep, in the background (0: none)")
          .env("GPUMEM_SLEEP_RESERVE", "")  // no describe() label: config strings stay as they were
          .doc("Host bytes pinned for the backups of sleeping tags when the allocator is made, on background "
               "threads (nothing waits for them), so that a first sleep copies at the host link's speed instead of "
               "pinning as it copies; counted against `backupLimitBytes`. 0 (the default): none (`reserveBackup` "
               "asks later)."),
  };
}

}  // namespace gpumem

/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per event, to stderr in the foreground and to syslog
 * once the daemon has detached. Safe from any thread.
 */
#ifndef BLOCKFS_LOG_H
#define BLOCKFS_LOG_H

#include <stdbool.h>
#include <syslog.h>

#include "blockfs/common.h"

/* Route messages to syslog (true) or stderr (false, the default). */
void bfs_log_to_syslog(bool on);
/* Messages above @level (a LOG_* priority) are dropped; default LOG_INFO. */
void bfs_log_set_level(int level);
void bfs_log(int level, const char *fmt, ...) BFS_PRINTF(2, 3);

#define bfs_err(...)  bfs_log(LOG_ERR, __VA_ARGS__)
#define bfs_warn(...) bfs_log(LOG_WARNING, __VA_ARGS__)
#define bfs_info(...) bfs_log(LOG_INFO, __VA_ARGS__)
#define bfs_dbg(...)  bfs_log(LOG_DEBUG, __VA_ARGS__)

#endif

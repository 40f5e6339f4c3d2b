// SPDX-License-Identifier: MIT
/*
 * One-line log messages to stderr (foreground) or syslog (daemon).
 * The whole line is formatted first and written with one call, so lines
 * from different threads never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "blockfs/log.h"

static atomic_bool use_syslog;
static atomic_int max_level = LOG_INFO;

void bfs_log_to_syslog(bool on)
{
	if (on)
		openlog("blockfs", LOG_PID, LOG_DAEMON);
	atomic_store(&use_syslog, on);
}

void bfs_log_set_level(int level)
{
	atomic_store(&max_level, level);
}

void bfs_log(int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > atomic_load(&max_level))
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	if (atomic_load(&use_syslog)) {
		syslog(level, "%s", line);
		return;
	}
	line[n++] = '\n';
	if (write(STDERR_FILENO, "blockfs: ", 9) < 0 || write(STDERR_FILENO, line, (size_t)n) < 0)
		return;		/* nowhere left to report it */
}

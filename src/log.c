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

#define PREFIX	   "blockfs: " /* stderr only: syslog names us itself */
#define PREFIX_LEN (sizeof(PREFIX) - 1)

void bfs_log(int level, const char *fmt, ...)
{
	char line[1024] = PREFIX;
	char *msg = line + PREFIX_LEN;
	size_t room = sizeof(line) - PREFIX_LEN;
	va_list ap;
	int n;

	if (level > atomic_load(&max_level))
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, room - 1, fmt, ap); /* leaves room for the newline */
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > room - 2)
		n = (int)(room - 2);
	if (atomic_load(&use_syslog)) {
		syslog(level, "%s", msg);
		return;
	}
	msg[n++] = '\n';
	/* prefix, message and newline in one write, so threads never interleave */
	if (write(STDERR_FILENO, line, PREFIX_LEN + (size_t)n) < 0)
		return; /* nowhere left to report it */
}

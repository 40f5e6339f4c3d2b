// SPDX-License-Identifier: MIT
/* The thread-local hook behind bfs_handoff() (handoff.h). */
#include "config.h"

#include <stddef.h>

#include "blockfs/handoff.h"

static _Thread_local void (*hook)(void *arg);
static _Thread_local void *hook_arg;

void bfs_handoff_set(void (*fn)(void *arg), void *arg)
{
	hook = fn;
	hook_arg = arg;
}

void bfs_handoff(void)
{
	void (*fn)(void *arg) = hook;

	if (!fn)
		return;
	hook = NULL;
	fn(hook_arg);
}

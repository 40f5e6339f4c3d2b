/* SPDX-License-Identifier: MIT */
/*
 * Hand-over before a long wait. The FUSE loop (src/loop.c) lets the thread
 * that read a request answer it itself while nothing else reads
 * /dev/fuse; code below it that is about to block for long (decode a
 * block, read a backing file, walk an index) calls bfs_handoff() first,
 * so that another thread takes over reading. Calls only go down: the loop
 * passes its hook down as a thread-local function pointer.
 */
#ifndef BLOCKFS_HANDOFF_H
#define BLOCKFS_HANDOFF_H

/**
 * bfs_handoff_set() - what the calling thread's next bfs_handoff() runs.
 * @fn: called once with @arg, then forgotten; NULL forgets the hook.
 * Context: the hook belongs to the calling thread only.
 */
void bfs_handoff_set(void (*fn)(void *arg), void *arg);

/**
 * bfs_handoff() - the calling thread is about to block for long: run and
 * forget its hook, if it has one. Cheap when it has none.
 */
void bfs_handoff(void);

#endif

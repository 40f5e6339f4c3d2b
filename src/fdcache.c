// SPDX-License-Identifier: MIT
/*
 * The cache of backing descriptors (contract in fdcache.h).
 *
 * passthrough_ll pins an O_PATH descriptor per inode, and the kernel may
 * hold lookups of every file of a tree (ls -lR): a tree larger than the
 * descriptor limit then fails with EMFILE. Here at most c->max stay
 * open, least recently used closed first; a closed one is opened again
 * by path below SOURCE and must still be the same object (backing.c). What
 * that costs: an inode whose path no longer names it (its backing file was
 * renamed or deleted) can be reached only while its descriptor stays
 * open; afterwards it is -ESTALE, and the VFS looks the name up again.
 * Pinned descriptors (in use by an operation) are never closed, so the
 * bound may be overshot by the operations in flight.
 */
#include "config.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "blockfs/common.h"
#include "fdcache.h"

void bfs_fdc_init(struct bfs_fdc *c, size_t max)
{
	*c = (struct bfs_fdc){ .max = max };
	bfs_mutex_init(&c->lock);
}

void bfs_fdc_destroy(struct bfs_fdc *c)
{
	pthread_mutex_destroy(&c->lock);
}

size_t bfs_fdc_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 4096;
	return rl.rlim_cur / 4 > 16 ? (size_t)rl.rlim_cur / 4 : 16;
}

/* Unlink @e from the LRU list; c->lock held. */
static void fd_unlink(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	*(e->prev ? &e->prev->next : &c->mru) = e->next;
	*(e->next ? &e->next->prev : &c->lru) = e->prev;
	e->prev = e->next = NULL;
}

/* Make @e the most recently used; c->lock held. */
static void fd_push(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	e->prev = NULL;
	e->next = c->mru;
	*(c->mru ? &c->mru->prev : &c->lru) = e;
	c->mru = e;
}

/* Close unpinned descriptors, oldest first, down to @keep; c->lock held. */
static void fd_trim_to(struct bfs_fdc *c, size_t keep)
{
	struct bfs_fdc_ent *e = c->lru, *prev;

	for (; e && c->n > keep; e = prev) {
		prev = e->prev;
		if (e->pins)
			continue;
		fd_unlink(c, e);
		close(e->fd);
		e->fd = -1;
		c->n--;
	}
}

static void fd_trim(struct bfs_fdc *c)
{
	fd_trim_to(c, c->max);
}

void bfs_fdc_shed(struct bfs_fdc *c)
{
	bfs_mutex_lock(&c->lock);
	fd_trim_to(c, 0);
	bfs_mutex_unlock(&c->lock);
}

/* Give @e descriptor @fd (consumed), unless it has one; c->lock held. */
static void fd_adopt(struct bfs_fdc *c, struct bfs_fdc_ent *e, int fd, bool rd)
{
	if (e->fd >= 0) {
		close(fd);
		return;
	}
	e->fd = fd;
	e->rdonly = rd;
	c->n++;
	fd_push(c, e);
}

int bfs_fdc_get(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	int fd = -1;

	bfs_mutex_lock(&c->lock);
	if (e->fd >= 0) {
		e->pins++;
		fd_unlink(c, e);
		fd_push(c, e);
		fd = e->fd;
	}
	bfs_mutex_unlock(&c->lock);
	return fd;
}

void bfs_fdc_put(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	bfs_mutex_lock(&c->lock);
	e->pins--;
	if (c->n > c->max)
		fd_trim(c); /* over the bound while pins held it: give back now */
	bfs_mutex_unlock(&c->lock);
}

int bfs_fdc_adopt(struct bfs_fdc *c, struct bfs_fdc_ent *e, int fd, bool rd, bool pin)
{
	bfs_mutex_lock(&c->lock);
	fd_adopt(c, e, fd, rd); /* a closed one is worth reviving */
	if (pin)
		e->pins++;
	fd_trim(c);
	fd = e->fd;
	bfs_mutex_unlock(&c->lock);
	return fd;
}

void bfs_fdc_release(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	bfs_mutex_lock(&c->lock);
	if (e->fd >= 0) {
		fd_unlink(c, e);
		close(e->fd);
		e->fd = -1;
		c->n--;
	}
	bfs_mutex_unlock(&c->lock);
}

bool bfs_fdc_is_rdonly(struct bfs_fdc *c, struct bfs_fdc_ent *e, int fd)
{
	bool rd;

	bfs_mutex_lock(&c->lock);
	rd = e->fd == fd && e->rdonly; /* pinned: it stays this descriptor */
	bfs_mutex_unlock(&c->lock);
	return rd;
}

int bfs_fdc_rdonly_fd(struct bfs_fdc *c, struct bfs_fdc_ent *e)
{
	int fd;

	bfs_mutex_lock(&c->lock);
	fd = e->rdonly ? e->fd : -1; /* an O_PATH one holds no handle of the server's */
	bfs_mutex_unlock(&c->lock);
	return fd;
}

int bfs_fdc_replace(struct bfs_fdc *c, struct bfs_fdc_ent *e, int old, int fd)
{
	int rc = -1;

	bfs_mutex_lock(&c->lock);
	/* still the same descriptor (pinned by the caller): the number stays */
	if (e->fd == old && e->rdonly && dup3(fd, old, O_CLOEXEC) >= 0)
		rc = 0;
	bfs_mutex_unlock(&c->lock);
	return rc;
}

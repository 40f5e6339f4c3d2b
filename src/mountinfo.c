// SPDX-License-Identifier: MIT
/* This mount as the kernel lists it: mountinfo and the device's read-ahead. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/log.h"
#include "mountinfo.h"

bool bfs_mountinfo_line(char *line, const char *mnt, unsigned int *maj, unsigned int *min)
{
	unsigned int ma, mi;
	char *p, *q, *type;
	int at = 0;

	/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE ... */
	if (sscanf(line, "%*u %*u %u:%u %*s %n", &ma, &mi, &at) != 2 || at == 0)
		return false;
	type = strstr(line + at, " - ");
	if (!type || strncmp(type + 3, "fuse", 4) != 0)
		return false;
	/* Unescape the mount point in place: \ooo only ever shrinks. */
	for (p = q = line + at; *p && *p != ' '; q++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*q = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 4;
		} else {
			*q = *p++;
		}
	}
	*q = '\0';
	if (strcmp(line + at, mnt) != 0)
		return false;
	*maj = ma;
	*min = mi;
	return true;
}

int bfs_mount_dev(const char *mnt, unsigned int *maj, unsigned int *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		if (bfs_mountinfo_line(line, mnt, maj, min))
			rc = 0; /* the last match is the one on top */
	free(line);
	fclose(f);
	return rc;
}

void bfs_set_kernel_readahead(int found, unsigned int maj, unsigned int min, uint64_t bytes)
{
	char path[64], val[24];
	int fd, len, rc;

	if (bytes == 0)
		return; /* -o kernel_readahead=0: the kernel's own */
	if (found < 0) {
		bfs_warn("cannot find this mount in /proc/self/mountinfo (%s): the kernel's "
			 "read-ahead stays at its default",
			 strerror(-found));
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	len = snprintf(val, sizeof(val), "%llu", (unsigned long long)(bytes >> 10));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	rc = fd < 0 ? -errno : write(fd, val, (size_t)len) == len ? 0 : -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		bfs_warn("cannot set %s to %s: %s; the kernel's read-ahead stays at its default",
			 path, val, strerror(-rc));
}

bool bfs_unmounted(const char *mnt, unsigned int maj, unsigned int min)
{
	unsigned int ma, mi;
	int rc = bfs_mount_dev(mnt, &ma, &mi);

	return rc == -ENOENT || (rc == 0 && (ma != maj || mi != min));
}

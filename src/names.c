// SPDX-License-Identifier: MIT
/*
 * Name mapping (see names.h for the rule). Both directions walk the
 * registry's ordered (codec, suffix) pairs, which is what keeps readdir
 * and lookup in agreement.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/common.h"
#include "blockfs/names.h"

/*
 * Names are built with lengths and memcpy: a listing names every entry,
 * and snprintf's formatting was a tenth of the daemon's time in a `find`.
 */

/* @s, @len bytes long, into @out (NAME_MAX + 1 bytes) with a NUL. */
static void copy_name(char *out, const char *s, size_t len)
{
	memcpy(out, s, len);
	out[len] = '\0';
}

/* Does @s, @len bytes long, end in @suffix (and have more before it)? Sets @sl to its length. */
static bool ends_with(const char *s, size_t len, const char *suffix, size_t *sl)
{
	*sl = strlen(suffix);
	return len > *sl && memcmp(s + len - *sl, suffix, *sl) == 0;
}

/*
 * The backing name of the n-th suffix whose shown name is @name (@nl
 * bytes), into @out: 1; 0 when @name does not end in its shown part or
 * the result is past NAME_MAX; -1 past the list.
 */
static int with_suffix(const struct bfs_codec_conf *conf, const char *name, size_t nl, size_t n,
		       char *out, const struct bfs_codec **codec)
{
	const struct bfs_suffix *suffix;
	size_t sl, bl;

	if (!bfs_codec_suffix_at(conf, n, codec, &suffix))
		return -1;
	if (!ends_with(name, nl, suffix->shown, &sl))
		return 0;
	bl = strlen(suffix->backing);
	if (nl - sl + bl > NAME_MAX)
		return 0;
	memcpy(out, name, nl - sl);
	copy_name(out + nl - sl, suffix->backing, bl);
	return 1;
}

/* The rule without sidecars, for @backing of @len bytes: see names.h. */
static void shown_as(const struct bfs_name_ops *ops, void *ctx, const struct bfs_codec_conf *conf,
		     const char *backing, size_t len, char *shown, const struct bfs_codec **codec)
{
	const struct bfs_codec *c, *oc;
	char other[NAME_MAX + 1];
	const struct bfs_suffix *suffix;
	size_t sl, hl;

	*codec = NULL;
	for (size_t i = 0; bfs_codec_suffix_at(conf, i, &c, &suffix); i++) {
		if (!ends_with(backing, len, suffix->backing, &sl))
			continue;
		if (!ops->is_file(ctx, backing))
			break;
		hl = strlen(suffix->shown);
		if (len - sl + hl > NAME_MAX)
			break;
		memcpy(shown, backing, len - sl);
		copy_name(shown + len - sl, suffix->shown, hl);
		if (ops->exists(ctx, shown))
			break;
		for (size_t j = 0; j < i; j++)
			if (with_suffix(conf, shown, len - sl + hl, j, other, &oc) > 0 &&
			    ops->is_file(ctx, other))
				goto out_unchanged;
		*codec = c;
		return;
	}
out_unchanged:
	copy_name(shown, backing, len);
}

/*
 * Index files that the formats' own tools keep beside a compressed file:
 * bgzip's .gzi, tabix's .tbi and .csi, samtools faidx's .fai (of a BGZF
 * FASTA). They describe the compressed bytes, so beside the decoded view
 * they are meaningless.
 */
static const struct {
	const char *of, *side;
} sidecars[] = {
	{ ".gz", ".gzi" }, { ".gz", ".tbi" },  { ".gz", ".csi" },
	{ ".gz", ".fai" }, { ".bgz", ".gzi" },
};

/* Is @backing (@len bytes) a sidecar of an entry of its directory that is shown decoded? */
static bool hidden_sidecar(const struct bfs_name_ops *ops, void *ctx,
			   const struct bfs_codec_conf *conf, const char *backing, size_t len)
{
	const struct bfs_codec *c;
	char base[NAME_MAX + 1], shown[NAME_MAX + 1];
	size_t sl, ol;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(sidecars); i++) {
		if (!ends_with(backing, len, sidecars[i].side, &sl))
			continue;
		copy_name(base, backing, len - sl);
		if (!ends_with(base, len - sl, sidecars[i].of, &ol) || !ops->exists(ctx, base))
			continue;
		shown_as(ops, ctx, conf, base, len - sl, shown, &c);
		if (c)
			return true;
	}
	return false;
}

bool bfs_name_shown(const struct bfs_name_ops *ops, void *ctx, const char *backing, char *shown,
		    const struct bfs_codec **codec, bool keep, const struct bfs_codec_conf *conf)
{
	size_t len = strnlen(backing, NAME_MAX + 1);

	if (len > NAME_MAX) /* no backing name is: shown as it is, cut */
		len = NAME_MAX;
	if (!keep && hidden_sidecar(ops, ctx, conf, backing, len)) {
		*codec = NULL;
		copy_name(shown, backing, len);
		return false;
	}
	shown_as(ops, ctx, conf, backing, len, shown, codec);
	return true;
}

int bfs_name_resolve(const struct bfs_name_ops *ops, void *ctx, const char *name, char *backing,
		     const struct bfs_codec **codec, bool keep, const struct bfs_codec_conf *conf)
{
	size_t len = strnlen(name, NAME_MAX + 1);
	char shown[NAME_MAX + 1];
	int rc;

	if (len > NAME_MAX) /* no entry has such a name */
		return -ENOENT;
	if (ops->exists(ctx, name)) {
		if (!bfs_name_shown(ops, ctx, name, shown, codec, keep, conf))
			return -ENOENT; /* a hidden sidecar */
		/* It exists; but is it shown decoded under a shorter name? */
		if (strcmp(shown, name) != 0) {
			if (!keep)
				return -ENOENT;
			*codec = NULL; /* keep_compressed: its raw view */
		}
		copy_name(backing, name, len);
		return 0;
	}
	/* An empty stem names nothing: ".lz4" alone is shown as itself. */
	for (size_t i = 0; *name && (rc = with_suffix(conf, name, len, i, backing, codec)) >= 0;
	     i++)
		if (rc > 0 && ops->is_file(ctx, backing))
			return 0;
	*codec = NULL;
	return -ENOENT;
}

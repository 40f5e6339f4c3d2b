// SPDX-License-Identifier: MIT
/*
 * Name mapping (see names.h for the rule). Both directions walk the
 * registry's ordered (codec, suffix) pairs, which is what keeps readdir
 * and lookup in agreement.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/common.h"
#include "blockfs/names.h"

/*
 * The backing name of the n-th suffix whose shown name is @name, into
 * @out: 1; 0 when @name does not end in its shown part or the result is
 * past NAME_MAX; -1 past the list.
 */
static int with_suffix(const char *name, size_t n, char *out, const struct bfs_codec **codec)
{
	const struct bfs_suffix *suffix;
	size_t nl = strlen(name), sl;
	int len;

	if (!bfs_codec_suffix_at(n, codec, &suffix))
		return -1;
	sl = strlen(suffix->shown);
	if (nl <= sl || strcmp(name + nl - sl, suffix->shown) != 0)
		return 0;
	len = snprintf(out, NAME_MAX + 1, "%.*s%s", (int)(nl - sl), name, suffix->backing);
	return len > 0 && len <= NAME_MAX;
}

static bool ends_with(const char *s, size_t len, const char *suffix, size_t *sl)
{
	*sl = strlen(suffix);
	return len > *sl && strcmp(s + len - *sl, suffix) == 0;
}

/* The rule without sidecars: see names.h. */
static void shown_as(const struct bfs_name_ops *ops, void *ctx, const char *backing,
		     char *shown, const struct bfs_codec **codec)
{
	size_t len = strlen(backing), sl;
	const struct bfs_codec *c, *oc;
	char other[NAME_MAX + 1];
	const struct bfs_suffix *suffix;

	*codec = NULL;
	snprintf(shown, NAME_MAX + 1, "%s", backing);
	for (size_t i = 0; bfs_codec_suffix_at(i, &c, &suffix); i++) {
		if (!ends_with(backing, len, suffix->backing, &sl))
			continue;
		if (!ops->is_file(ctx, backing))
			break;
		if (snprintf(shown + len - sl, NAME_MAX + 1 - (len - sl), "%s", suffix->shown) >
		    NAME_MAX - (int)(len - sl))
			goto unchanged;
		if (ops->exists(ctx, shown))
			goto unchanged;
		for (size_t j = 0; j < i; j++)
			if (with_suffix(shown, j, other, &oc) > 0 && ops->is_file(ctx, other))
				goto unchanged;
		*codec = c;
		return;
	}
	return;
unchanged:
	snprintf(shown, NAME_MAX + 1, "%s", backing);
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
	{ ".gz", ".gzi" }, { ".gz", ".tbi" }, { ".gz", ".csi" }, { ".gz", ".fai" },
	{ ".bgz", ".gzi" },
};

/* Is @backing a sidecar of an entry of its directory that is shown decoded? */
static bool hidden_sidecar(const struct bfs_name_ops *ops, void *ctx, const char *backing)
{
	size_t len = strlen(backing), sl, ol;
	const struct bfs_codec *c;
	char base[NAME_MAX + 1], shown[NAME_MAX + 1];

	for (size_t i = 0; i < BFS_ARRAY_SIZE(sidecars); i++) {
		if (!ends_with(backing, len, sidecars[i].side, &sl))
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(len - sl), backing);
		if (!ends_with(base, len - sl, sidecars[i].of, &ol) || !ops->exists(ctx, base))
			continue;
		shown_as(ops, ctx, base, shown, &c);
		if (c)
			return true;
	}
	return false;
}

bool bfs_name_shown(const struct bfs_name_ops *ops, void *ctx, const char *backing,
		    char *shown, const struct bfs_codec **codec, bool keep)
{
	if (!keep && hidden_sidecar(ops, ctx, backing)) {
		*codec = NULL;
		snprintf(shown, NAME_MAX + 1, "%s", backing);
		return false;
	}
	shown_as(ops, ctx, backing, shown, codec);
	return true;
}

int bfs_name_resolve(const struct bfs_name_ops *ops, void *ctx, const char *name,
		     char *backing, const struct bfs_codec **codec, bool keep)
{
	char shown[NAME_MAX + 1];
	int rc;

	if (ops->exists(ctx, name)) {
		if (!bfs_name_shown(ops, ctx, name, shown, codec, keep))
			return -ENOENT;		/* a hidden sidecar */
		/* It exists; but is it shown decoded under a shorter name? */
		if (strcmp(shown, name) != 0) {
			if (!keep)
				return -ENOENT;
			*codec = NULL;	/* keep_compressed: its raw view */
		}
		snprintf(backing, NAME_MAX + 1, "%s", name);
		return 0;
	}
	/* An empty stem names nothing: ".lz4" alone is shown as itself. */
	for (size_t i = 0; *name && (rc = with_suffix(name, i, backing, codec)) >= 0; i++)
		if (rc > 0 && ops->is_file(ctx, backing))
			return 0;
	*codec = NULL;
	return -ENOENT;
}

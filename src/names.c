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
#include "blockfs/names.h"

/* @stem + the n-th suffix into @out: 1, 0 when past NAME_MAX, -1 past the list. */
static int with_suffix(const char *stem, size_t n, char *out, const struct bfs_codec **codec)
{
	const char *suffix;
	int len;

	if (!bfs_codec_suffix_at(n, codec, &suffix))
		return -1;
	len = snprintf(out, NAME_MAX + 1, "%s%s", stem, suffix);
	return len > 0 && len <= NAME_MAX;
}

static bool ends_with(const char *s, size_t len, const char *suffix, size_t *sl)
{
	*sl = strlen(suffix);
	return len > *sl && strcmp(s + len - *sl, suffix) == 0;
}

void bfs_name_shown(const struct bfs_name_ops *ops, void *ctx, const char *backing,
		    char *shown, const struct bfs_codec **codec)
{
	size_t len = strlen(backing), sl;
	const struct bfs_codec *c, *oc;
	char other[NAME_MAX + 1];
	const char *suffix;

	*codec = NULL;
	snprintf(shown, NAME_MAX + 1, "%s", backing);
	for (size_t i = 0; bfs_codec_suffix_at(i, &c, &suffix); i++) {
		if (!ends_with(backing, len, suffix, &sl))
			continue;
		/* Another codec may take the same suffix (.gz: BGZF, then plain gzip). */
		if (!ops->claims(ctx, backing, c))
			continue;
		shown[len - sl] = '\0';		/* the stem */
		if (ops->exists(ctx, shown))
			goto unchanged;
		for (size_t j = 0; j < i; j++)
			if (with_suffix(shown, j, other, &oc) > 0 && ops->claims(ctx, other, oc))
				goto unchanged;
		*codec = c;
		return;
	}
	return;
unchanged:
	snprintf(shown, NAME_MAX + 1, "%s", backing);
}

int bfs_name_resolve(const struct bfs_name_ops *ops, void *ctx, const char *name,
		     char *backing, const struct bfs_codec **codec)
{
	char shown[NAME_MAX + 1];
	int rc;

	if (ops->exists(ctx, name)) {
		/* It exists; but is it shown under a shorter name? */
		bfs_name_shown(ops, ctx, name, shown, codec);
		if (strcmp(shown, name) != 0)
			return -ENOENT;
		snprintf(backing, NAME_MAX + 1, "%s", name);
		return 0;
	}
	/* An empty stem names nothing: ".lz4" alone is shown as itself. */
	for (size_t i = 0; *name && (rc = with_suffix(name, i, backing, codec)) >= 0; i++)
		if (rc > 0 && ops->claims(ctx, backing, *codec))
			return 0;
	*codec = NULL;
	return -ENOENT;
}

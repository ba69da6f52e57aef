/* whisper_output.c — a transcript to a file, as whisper-cli writes them:
 *   .txt   the segments' text, one per line
 *   .srt   "N\nHH:MM:SS,mmm --> HH:MM:SS,mmm\nTEXT\n\n" from N = 1
 *   .vtt   "WEBVTT\n\n" then "HH:MM:SS.mmm --> HH:MM:SS.mmm\nTEXT\n\n"
 *   .json  {"text": all segments' text, "segments": [{"start", "end", "text",
 *          "tokens", "avg_logprob", "no_speech_prob", "temperature"}], "report"}
 * Text is the segment's text tokens decoded (bytes that are not valid UTF-8
 * become U+FFFD, as tiktoken's decode(errors="replace")), leading/trailing spaces trimmed
 * (txt, srt, vtt) as whisper-cli prints them; json keeps it as decoded.
 * Every file goes through AtomicFile: a failed run leaves no partial file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"

int transcript_format(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (!dot || strchr(dot, '/'))
		return -1;
	static const char *ext[] = {".txt", ".srt", ".vtt", ".json"};
	for (int i = 0; i < 4; i++)
		if (strcmp(dot, ext[i]) == 0)
			return i;
	return -1;
}

void transcript_time(double s, char sep, char *buf, size_t n)
{
	int64_t ms = (int64_t)llround(s * 1000.0);
	if (ms < 0)
		ms = 0;
	snprintf(buf, n, "%02lld:%02lld:%02lld%c%03lld", (long long)(ms / 3600000), (long long)(ms / 60000 % 60),
	         (long long)(ms / 1000 % 60), sep, (long long)(ms % 1000));
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t k = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
	if (k == 0 || k > n || (k == 2 && s[0] < 0xC2))
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	if ((k == 3 && s[0] == 0xE0 && s[1] < 0xA0) || (k == 3 && s[0] == 0xED && s[1] >= 0xA0) ||
	    (k == 4 && s[0] == 0xF0 && s[1] < 0x90) || (k == 4 && (s[0] > 0xF4 || (s[0] == 0xF4 && s[1] >= 0x90))))
		return 0;
	return k;
}

char *segment_text(const WhisperVocab *v, const WhisperSegment *s)
{
	size_t len = vocab_decode(v, s->tokens, s->ntokens, false, NULL, 0);
	char *raw = malloc(len + 1), *t = malloc(3 * len + 1);
	if (!raw || !t)
		wl_die(__FILE__, __LINE__, "out of memory");
	vocab_decode(v, s->tokens, s->ntokens, false, raw, len + 1);
	size_t k = 0;
	for (size_t i = 0; i < len;) {              /* invalid UTF-8 → U+FFFD, as tiktoken's decode */
		size_t n = utf8_len((const unsigned char *)raw + i, len - i);
		if (n) {
			memcpy(t + k, raw + i, n);
			k += n;
			i += n;
		} else {
			memcpy(t + k, "\xEF\xBF\xBD", 3);
			k += 3;
			i++;
		}
	}
	t[k] = 0;
	free(raw);
	return t;
}

/* s trimmed of spaces at both ends (in place; returns its start). */
static char *trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
		s[--n] = 0;
	while (*s == ' ')
		s++;
	return s;
}

static void write_json(FILE *f, const WhisperSegment *segs, int nseg, const WhisperVocab *v, const cJSON *report)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *arr = cJSON_CreateArray();
	size_t cap = 1, len = 0;
	char *all = calloc(1, 1);
	if (!all)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < nseg; i++) {
		char *t = segment_text(v, &segs[i]);
		size_t tl = strlen(t);
		if (len + tl + 1 > cap && !(all = realloc(all, cap = 2 * (len + tl + 1))))
			wl_die(__FILE__, __LINE__, "out of memory");
		memcpy(all + len, t, tl + 1);
		len += tl;
		cJSON *s = cJSON_CreateObject();
		cJSON_AddNumberToObject(s, "id", i);
		cJSON_AddNumberToObject(s, "start", round(segs[i].start * 1000) / 1000);
		cJSON_AddNumberToObject(s, "end", round(segs[i].end * 1000) / 1000);
		cJSON_AddStringToObject(s, "text", t);
		cJSON *tk = cJSON_AddArrayToObject(s, "tokens");
		for (int k = 0; k < segs[i].ntokens; k++)
			cJSON_AddItemToArray(tk, cJSON_CreateNumber((double)segs[i].tokens[k]));
		cJSON_AddNumberToObject(s, "avg_logprob", segs[i].avg_logprob);
		cJSON_AddNumberToObject(s, "no_speech_prob", segs[i].no_speech_prob);
		cJSON_AddNumberToObject(s, "temperature", segs[i].temperature);
		cJSON_AddItemToArray(arr, s);
		free(t);
	}
	cJSON_AddStringToObject(root, "text", all);
	cJSON_AddItemToObject(root, "segments", arr);
	if (report)
		cJSON_AddItemToObject(root, "report", cJSON_Duplicate(report, 1));
	char *txt = cJSON_Print(root);
	if (!txt)
		wl_die(__FILE__, __LINE__, "out of memory");
	fputs(txt, f);
	fputc('\n', f);
	free(txt);
	free(all);
	cJSON_Delete(root);
}

int transcript_write(const char *path, TranscriptFormat fmt, const WhisperSegment *segs, int nseg,
                     const WhisperVocab *v, const cJSON *report, Diag *d)
{
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	FILE *f = af.f;
	if (fmt == TF_JSON) {
		write_json(f, segs, nseg, v, report);
		return atomic_commit(&af, d);
	}
	if (fmt == TF_VTT)
		fputs("WEBVTT\n\n", f);
	for (int i = 0; i < nseg; i++) {
		char *t = segment_text(v, &segs[i]), a[32], b[32];
		char sep = fmt == TF_SRT ? ',' : '.';
		transcript_time(segs[i].start, sep, a, sizeof a);
		transcript_time(segs[i].end, sep, b, sizeof b);
		if (fmt == TF_TXT)
			fprintf(f, "%s\n", trim(t));
		else if (fmt == TF_SRT)
			fprintf(f, "%d\n%s --> %s\n%s\n\n", i + 1, a, b, trim(t));
		else
			fprintf(f, "%s --> %s\n%s\n\n", a, b, trim(t));
		free(t);
	}
	return atomic_commit(&af, d);
}

/* test_whisper_text.c — the Whisper tokenizer (runtime/pipelines/
 * whisper_tokenizer.c) on the real ../shared/data/whisper/multilingual.tiktoken
 * and the transcript writers (whisper_output.c) on fixed segments.
 * Expected ids were read from the file by hand: " Hello" is the line
 * "IEhlbGxv 2425" (base64 of the 6 bytes), " world" "IHdvcmxk 1002", "," "LA== 11",
 * "." "Lg== 13", the lone byte 0xC5 "xQ== 129"; rank 50256 is the empty token "=". Special ids are
 * Whisper's multilingual layout (docs/DESIGN.md: sot 50258, en 50259,
 * transcribe 50359, notimestamps 50363, eot 50257; timestamps from 50364). */
#include <check.h>
#include "check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/pipelines/pipeline.h"

#define TIKTOKEN WLOWER_SOURCE_ROOT "/../shared/data/whisper/multilingual.tiktoken"

static WhisperVocab *vocab(void)
{
	WhisperVocab *v = NULL;
	Diag d = {0};
	int rc = vocab_read(TIKTOKEN, 51865, &v, &d);
	ck_assert_msg(rc == WL_OK, "%s", d.msg);
	return v;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strdup(buf);
}

START_TEST(test_decode)
{
	WhisperVocab *v = vocab();
	ck_assert_int_eq(vocab_size(v), 50257);
	char buf[256];
	int64_t hw[] = {2425, 1002, 11, 13};
	ck_assert_uint_eq(vocab_decode(v, hw, 4, false, buf, sizeof buf), 14);
	ck_assert_str_eq(buf, " Hello world,.");
	int64_t sp[] = {50258, 50259, 50359, 50363, 2425, 50364, 50365, 50414, 51864, 50257, 50256};
	vocab_decode(v, sp, 11, true, buf, sizeof buf);
	ck_assert_str_eq(buf, "<|startoftranscript|><|en|><|transcribe|><|notimestamps|> Hello<|0.00|><|0.02|>"
	                      "<|1.00|><|30.00|><|endoftext|>");
	vocab_decode(v, sp, 11, false, buf, sizeof buf);
	ck_assert_str_eq(buf, " Hello");
	ck_assert_uint_eq(vocab_decode(v, hw, 4, false, buf, 6), 14);   /* truncated, full length returned */
	ck_assert_str_eq(buf, " Hell");
	int64_t tr[] = {50358, 50360, 50361, 50362};
	vocab_decode(v, tr, 4, true, buf, sizeof buf);
	ck_assert_str_eq(buf, "<|translate|><|startoflm|><|startofprev|><|nospeech|>");
	ck_assert_int_eq(vocab_language(v, "en"), 50259);
	ck_assert_int_eq(vocab_language(v, "de"), 50261);
	ck_assert_int_eq(vocab_language(v, "su"), 50357);               /* the 99th */
	ck_assert_int_eq(vocab_language(v, "yue"), -1);                 /* large-v3 only */
	ck_assert_int_eq(vocab_language(v, "xx"), -1);
	int64_t ids[16];
	Diag d = {0};
	ck_assert_int_eq(vocab_encode(v, " Hello world", ids, 16, &d), 2);
	ck_assert_int_eq(ids[0], 2425);
	ck_assert_int_eq(ids[1], 1002);
	ck_assert_int_eq(vocab_encode(v, " Hello world", ids, 1, &d), -1);
	ck_assert_str_eq(d.msg, "the text is longer than 1 tokens");
	ck_assert_int_eq(vocab_encode(v, "\xff", ids, 16, &(Diag){0}), -1);
	vocab_free(v);
}
END_TEST

static void bad_file(const char *text, const char *want)
{
	char path[] = "/tmp/wl-tiktoken-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	WhisperVocab *v = NULL;
	Diag d = {0};
	ck_assert_int_eq(vocab_read(path, 51865, &v, &d), WL_ERR);
	ck_assert_ptr_null(v);
	char full[512];
	snprintf(full, sizeof full, "%s%s", path, want);
	ck_assert_str_eq(d.msg, full);
	unlink(path);
}

START_TEST(test_bad_vocab)
{
	bad_file("IQ== 0\nIg== x\n", ":2: expected 'BASE64 RANK' with a rank below 65536");
	bad_file("IQ== 0\n!!!! 1\n", ":2: expected 'BASE64 RANK' with a rank below 65536");
	bad_file("IQ== 0\nIg== 0\n", ":2: rank 0 given twice (first on line 1)");
	bad_file("IQ== 0\nIg== 2\n", ": rank 1 is missing (ranks must be 0..2)");
	bad_file("IQ== 0\nIg== 1\n", ": 2 tokens, Whisper's multilingual vocabulary has 50257 (is it gpt2.tiktoken "
	                             "or another model's?)");
	WhisperVocab *v = NULL;
	Diag d = {0};
	ck_assert_int_eq(vocab_read("/nonexistent/multilingual.tiktoken", 51865, &v, &d), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d.msg, "/nonexistent/multilingual.tiktoken"));
}
END_TEST

START_TEST(test_writers)
{
	WhisperVocab *v = vocab();
	int64_t t0[] = {50364, 2425, 1002, 11, 50414}, t1[] = {50414, 1002, 13, 51864};
	WhisperSegment s[2] = {
		{0.0, 1.0, t0, 5, -0.25, 0.125, 0},
		{3601.5, 3602.0049, t1, 4, -0.5, 0.0625, 0.2},
	};
	char dir[] = "/tmp/wl-transcript-XXXXXX", path[256];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	Diag d = {0};
	snprintf(path, sizeof path, "%s/a.srt", dir);
	ck_assert_int_eq(transcript_format(path), TF_SRT);
	ck_assert_int_eq(transcript_write(path, TF_SRT, s, 2, v, NULL, &d), WL_OK);
	char *txt = slurp(path);
	ck_assert_str_eq(txt, "1\n00:00:00,000 --> 00:00:01,000\nHello world,\n\n"
	                      "2\n01:00:01,500 --> 01:00:02,005\nworld.\n\n");
	free(txt);
	snprintf(path, sizeof path, "%s/a.vtt", dir);
	ck_assert_int_eq(transcript_write(path, TF_VTT, s, 2, v, NULL, &d), WL_OK);
	txt = slurp(path);
	ck_assert_str_eq(txt, "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHello world,\n\n"
	                      "01:00:01.500 --> 01:00:02.005\nworld.\n\n");
	free(txt);
	snprintf(path, sizeof path, "%s/a.txt", dir);
	ck_assert_int_eq(transcript_write(path, TF_TXT, s, 2, v, NULL, &d), WL_OK);
	txt = slurp(path);
	ck_assert_str_eq(txt, "Hello world,\nworld.\n");
	free(txt);
	snprintf(path, sizeof path, "%s/a.json", dir);
	cJSON *rep = cJSON_CreateObject();
	cJSON_AddStringToObject(rep, "target", "ref");
	ck_assert_int_eq(transcript_write(path, TF_JSON, s, 2, v, rep, &d), WL_OK);
	txt = slurp(path);
	cJSON *j = cJSON_Parse(txt);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, " Hello world, world.");
	cJSON *segs = cJSON_GetObjectItem(j, "segments"), *s1 = cJSON_GetArrayItem(segs, 1);
	ck_assert_int_eq(cJSON_GetArraySize(segs), 2);
	ck_assert_double_eq(cJSON_GetObjectItem(s1, "start")->valuedouble, 3601.5);
	ck_assert_double_eq(cJSON_GetObjectItem(s1, "end")->valuedouble, 3602.005);
	ck_assert_str_eq(cJSON_GetObjectItem(s1, "text")->valuestring, " world.");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(s1, "tokens")), 4);
	ck_assert_double_eq(cJSON_GetObjectItem(s1, "avg_logprob")->valuedouble, -0.5);
	ck_assert_double_eq(cJSON_GetObjectItem(s1, "no_speech_prob")->valuedouble, 0.0625);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "report"), "target")->valuestring, "ref");
	cJSON_Delete(j);
	cJSON_Delete(rep);
	free(txt);
	int64_t bad[] = {2425, 129, 1002};       /* 0xC5 alone is not UTF-8: U+FFFD */
	WhisperSegment bs = {0, 1, bad, 3, 0, 0, 0};
	char *bt = segment_text(v, &bs);
	ck_assert_str_eq(bt, " Hello\xEF\xBF\xBD world");
	free(bt);
	ck_assert_int_eq(transcript_format("x.mp4"), -1);
	ck_assert_int_eq(transcript_format("dir.srt/x"), -1);
	snprintf(path, sizeof path, "%s/no/such/a.srt", dir);
	ck_assert_int_eq(transcript_write(path, TF_SRT, s, 2, v, NULL, &d), WL_ERR);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	vocab_free(v);
}
END_TEST

CHECK_MAIN("whisper_text", "whisper_text", test_decode, test_bad_vocab, test_writers)

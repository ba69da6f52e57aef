/* pbwire.c — minimal protobuf wire-format scanner.
 *
 * Reads varints and walks the fields of one message inside a byte slice,
 * skipping any wire type (groups included, without recursion). Every read is
 * checked against the end of the slice, so a hostile file can make a scan
 * fail but never read out of bounds. pb_check() additionally follows the
 * sub-messages that a protobuf-c descriptor names, with a depth limit, so
 * that protobuf-c's (recursive) unpack only ever sees bounded nesting.
 */
#include "pbwire.h"

void
pb_init(PbReader *r, const void *buf, size_t len)
{
	r->p = buf;
	r->end = r->p + (buf ? len : 0);
}

int
pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		if (q >= end)
			return -1;
		uint8_t b = *q++;
		/* the 10th byte may only contribute the top bit */
		if (shift == 63 && b > 1)
			return -1;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*p = q;
			*out = v;
			return 0;
		}
	}
	return -1;
}

size_t
pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Reads a tag; fills num and wt. */
static int
read_tag(const uint8_t **p, const uint8_t *end, uint32_t *num, int *wt)
{
	uint64_t tag;

	if (pb_varint(p, end, &tag) < 0)
		return -1;
	if (tag >> 32)
		return -1;
	*num = (uint32_t)(tag >> 3);
	*wt = (int)(tag & 7);
	if (*num == 0 || *wt > PB_FIXED32)
		return -1;
	return 0;
}

/* Skips the payload of a field whose tag was just read. For a group, q
 * points after the SGROUP tag and the body ends before the matching EGROUP
 * tag; nesting is tracked with a counter, not recursion. */
static int
skip_payload(const uint8_t **p, const uint8_t *end, uint32_t num, int wt,
             PbField *f)
{
	const uint8_t *q = *p;
	uint64_t v;

	switch (wt) {
	case PB_VARINT:
		if (pb_varint(&q, end, &v) < 0)
			return -1;
		f->u = v;
		break;
	case PB_FIXED64:
		if (end - q < 8)
			return -1;
		v = 0;
		for (int i = 7; i >= 0; i--)
			v = v << 8 | q[i];
		f->u = v;
		q += 8;
		break;
	case PB_FIXED32:
		if (end - q < 4)
			return -1;
		f->u = (uint64_t)q[0] | (uint64_t)q[1] << 8 |
		       (uint64_t)q[2] << 16 | (uint64_t)q[3] << 24;
		q += 4;
		break;
	case PB_LEN:
		if (pb_varint(&q, end, &v) < 0)
			return -1;
		if (v > (uint64_t)(end - q))
			return -1;
		f->data = q;
		f->len = (size_t)v;
		q += v;
		break;
	case PB_SGROUP: {
		/* body: fields until the EGROUP with our number */
		const uint8_t *body = q;
		uint32_t stack_num = num;
		uint64_t depth = 1;
		for (;;) {
			uint32_t n2;
			int w2;
			const uint8_t *tagp = q;
			if (read_tag(&q, end, &n2, &w2) < 0)
				return -1;
			if (w2 == PB_EGROUP) {
				depth--;
				if (depth == 0) {
					if (n2 != stack_num)
						return -1;
					f->data = body;
					f->len = (size_t)(tagp - body);
					break;
				}
				continue;
			}
			if (w2 == PB_SGROUP) {
				depth++;
				continue;
			}
			PbField dummy;
			if (skip_payload(&q, end, n2, w2, &dummy) < 0)
				return -1;
		}
		break;
	}
	default:
		return -1;       /* a stray EGROUP */
	}
	*p = q;
	return 0;
}

int
pb_next(PbReader *r, PbField *f)
{
	const uint8_t *q = r->p;

	if (q >= r->end)
		return 0;
	f->start = q;
	f->data = NULL;
	f->len = 0;
	f->u = 0;
	if (read_tag(&q, r->end, &f->num, &f->wt) < 0)
		return -1;
	if (skip_payload(&q, r->end, f->num, f->wt, f) < 0)
		return -1;
	f->stop = q;
	r->p = q;
	return 1;
}

static int
check_rec(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc,
          int depth_left)
{
	PbReader r;
	PbField f;
	int rc;

	if (depth_left <= 0)
		return -2;
	pb_init(&r, buf, len);
	while ((rc = pb_next(&r, &f)) > 0) {
		const ProtobufCFieldDescriptor *fd =
			protobuf_c_message_descriptor_get_field(desc, f.num);
		if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f.wt != PB_LEN)
			return -1;
		int c = check_rec(f.data, f.len, fd->descriptor, depth_left - 1);
		if (c < 0)
			return c;
	}
	return rc;
}

int
pb_check(const void *buf, size_t len, const ProtobufCMessageDescriptor *desc,
         int max_depth)
{
	return check_rec(buf, len, desc, max_depth);
}

/* pbwire.h — minimal protobuf wire-format scanning (pbwire.c).
 *
 * The importer walks ModelProto and GraphProto by hand so that raw_data of
 * initializers can stay in the mmapped file: protobuf-c's unpack would copy
 * every `bytes` field. Everything here is bounds-checked against the slice
 * it was given; malformed input yields -1, never a read past the end.
 */
#ifndef WLOWER_PBWIRE_H
#define WLOWER_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

enum {
	PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2,
	PB_SGROUP = 3, PB_EGROUP = 4, PB_FIXED32 = 5
};

/* A cursor over one message's bytes. */
typedef struct PbReader {
	const uint8_t *p, *end;
} PbReader;

/* One field as found on the wire. */
typedef struct PbField {
	uint32_t num;              /* field number, >= 1 */
	int wt;                    /* PB_* wire type */
	uint64_t u;                /* VARINT / FIXED32 / FIXED64 value */
	const uint8_t *data;       /* PB_LEN payload (or group body) */
	size_t len;
	const uint8_t *start;      /* the whole field, tag included: */
	const uint8_t *stop;       /*   [start, stop) can be copied verbatim */
} PbField;

void pb_init(PbReader *r, const void *buf, size_t len);
/* Reads the next field. Returns 1 (field read), 0 (clean end of the
 * message), -1 (malformed: bad varint, bad wire type, field number 0,
 * length past the end, unbalanced group). */
int pb_next(PbReader *r, PbField *f);
/* Decodes one varint at *p (at most 10 bytes, never past end). */
int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

/* Walks a message guided by a protobuf-c descriptor and checks that the
 * wire format is well formed at every level that the descriptor says is a
 * sub-message, and that messages nest at most `max_depth` deep. Run before
 * protobuf-c's unpack, whose recursion is unbounded. Returns 0, -1
 * (malformed) or -2 (well formed so far, but nested deeper than max_depth). */
int pb_check(const void *buf, size_t len, const ProtobufCMessageDescriptor *desc,
             int max_depth);

/* Number of bytes a varint takes (export side size computations). */
size_t pb_varint_size(uint64_t v);

#endif

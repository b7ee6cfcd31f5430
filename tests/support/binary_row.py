"""A BinaryRow encoder for unit tests, following Java's layout (BinaryRow, AbstractBinaryWriter).

Only for building inputs of decoder tests; real tables in the other tests are written by Paimon.
"""

import struct


def encode_binary_row(values, roots):
    """``values`` are internal values; ``roots`` Paimon type roots ('INT', 'VARCHAR', 'TIMESTAMP9', ...)."""
    arity = len(values)
    nbs = ((arity + 63 + 8) // 64) * 8
    fixed = bytearray(nbs + 8 * arity)
    var = bytearray()
    for i, (v, r) in enumerate(zip(values, roots)):
        off = nbs + 8 * i
        if v is None:
            bit = i + 8
            fixed[bit >> 3] |= 1 << (bit & 7)
            continue
        if r == "BOOLEAN":
            fixed[off] = 1 if v else 0
        elif r in ("TINYINT",):
            fixed[off:off + 1] = struct.pack("<b", v)
        elif r == "SMALLINT":
            fixed[off:off + 2] = struct.pack("<h", v)
        elif r in ("INT", "DATE", "TIME"):
            fixed[off:off + 4] = struct.pack("<i", v)
        elif r in ("BIGINT", "TIMESTAMP3", "DECIMAL18"):
            fixed[off:off + 8] = struct.pack("<q", v)
        elif r == "FLOAT":
            fixed[off:off + 4] = struct.pack("<f", v)
        elif r == "DOUBLE":
            fixed[off:off + 8] = struct.pack("<d", v)
        elif r == "TIMESTAMP9":  # (millis, nano_of_milli)
            millis, nano = v
            pos = len(fixed) + len(var)
            var += struct.pack("<q", millis)
            fixed[off:off + 8] = struct.pack("<Q", (pos << 32) | nano)
        elif r in ("VARCHAR", "VARBINARY", "DECIMAL38"):
            data = v.encode() if isinstance(v, str) else (
                v.to_bytes((v.bit_length() + 8) // 8 or 1, "big", signed=True) if isinstance(v, int) else v
            )
            if len(data) <= 7 and r != "DECIMAL38":
                slot = bytearray(8)
                slot[:len(data)] = data
                slot[7] = 0x80 | len(data)
                fixed[off:off + 8] = slot
            else:
                pos = len(fixed) + len(var)
                var += data + b"\0" * ((8 - len(data) % 8) % 8)
                fixed[off:off + 8] = struct.pack("<Q", (pos << 32) | len(data))
        else:
            raise ValueError(r)
    return struct.pack(">i", arity) + bytes(fixed) + bytes(var)

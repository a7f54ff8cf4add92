#!/usr/bin/env python3
"""Print the float64 sin/cos reduction constants of src/graph/mathconst.h
(tc_f64m_trig_band, tc_f64m_inv2pi_band): 1/(2 pi) cut into 26-bit chunks
per exponent band, plus a double tail.  Needs mpmath.

    python3 scripts/gen_trig64_consts.py > /tmp/trig64.h

Band k holds |x| in [2^E_k, 2^(E_k + W)) (band 0 everything below too);
its chunks j = 0..H-1 are the bits of 1/(2 pi) of weight 2^-(S + 26 j)
down to 2^-(S + 26 j + 25), S = E_k - 51, so the bits above S (weight
>= 2^-(E_k - 52)) give integers times x; the tail is the double nearest to
what follows the last chunk.  See transcendental.c, reduce_huge64.
"""
import mpmath

NBANDS, W, NCHUNKS, CHUNK = 8, 126, 7, 26

mpmath.mp.prec = 1600
INV2PI = 1 / (2 * mpmath.pi)


def bits_below(pos):
    """1/(2 pi) truncated after the bit of weight 2^-pos."""
    return mpmath.floor(INV2PI * mpmath.mpf(2) ** pos) * mpmath.mpf(2) ** -pos


def band(k):
    e = 1024 - (NBANDS - k) * W
    s = e - 51
    row = []
    for j in range(NCHUNKS):
        lo = s + CHUNK * j + CHUNK - 1
        c = bits_below(lo) - bits_below(lo - CHUNK)
        assert mpmath.mpf(float(c)) == c, "chunk not a double"
        row.append(float(c))
    row.append(float(INV2PI - bits_below(s + CHUNK * NCHUNKS - 1)))
    # what reduce_huge64 relies on, for every |x| < 2^(e + W) of the band:
    # x times the tail and xl (< 2^(e + W - 26)) times the last chunk are
    # below 1/16, xh (a multiple of 2^(e - 25)) times the first chunk (a
    # multiple of 2^-(s + 25)) is an even integer
    top = mpmath.mpf(2) ** (e + W)
    assert top * abs(row[-1]) < 0.0625
    assert top / 2 ** 26 * row[-2] < 0.0625
    assert e - 25 - (s + CHUNK - 1) >= 1
    return e, row


def chex(v):
    """v as a short C hex float literal"""
    if v == 0:
        return "0.0"
    m, e = v.hex().split("p")
    m = m.rstrip("0").rstrip(".")
    return f"{m}p{e}"


def main():
    bands = [band(k) for k in range(NBANDS)]
    print(f"#define TC_F64M_TRIG_NBANDS {NBANDS}")
    print(f"#define TC_F64M_TRIG_NCHUNKS {NCHUNKS}")
    print("static const double tc_f64m_trig_band[TC_F64M_TRIG_NBANDS] = {")
    print("    " + ", ".join("0x1p%d" % e for e, _ in bands) + "};")
    print("static const double tc_f64m_inv2pi_band[TC_F64M_TRIG_NBANDS]"
          "[TC_F64M_TRIG_NCHUNKS + 1] = {")
    for e, row in bands:
        vals = [chex(v) for v in row]
        print("    {" + ", ".join(vals[:4]) + ",")
        print("     " + ", ".join(vals[4:]) + "},")
    print("};")


if __name__ == "__main__":
    main()

"""Generate test_graph_rv.h: views and reductions checked against eager.

Every case builds one input with torch.as_strided over a deterministic
storage (the C test builds the same storage), applies one view / reduction
/ normalization and records the result's dtype, sizes, strides, storage
offset and values (row-major), or torch's error message.
Usage: python3 gen_test_graph_rv.py test_graph_rv.h
"""
import torch, sys, math, warnings
warnings.filterwarnings("ignore")
OUT = sys.argv[1]
DT = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
      torch.int64, torch.float32, torch.float64]
DTC = ['TC_BOOL', 'TC_U8', 'TC_I8', 'TC_I16', 'TC_I32', 'TC_I64', 'TC_F32',
       'TC_F64']
NONE = 'NONE_I'


def storage_value(s, dt):
    """Same formula as storage_value() in test_graph.c."""
    if dt == torch.bool:
        return (s % 3) == 0
    if dt.is_floating_point:
        return ((s * 7919) % 23 - 11) / 4.0
    v = (s * 37) % 11 - 5
    return v + 5 if dt == torch.uint8 else v


def make(dt, sizes, strides):
    ext = 1 + sum((n - 1) * st for n, st in zip(sizes, strides)) \
        if all(n > 0 for n in sizes) else 1
    data = torch.tensor([storage_value(s, dt) for s in range(ext)], dtype=dt)
    return torch.as_strided(data, sizes, strides)


def cl(v):
    v = list(v)
    return '{' + (','.join(x if isinstance(x, str) else str(int(x)) for x in v) if v else '0') + '}'


def fnum(x):
    if isinstance(x, bool):
        return '1' if x else '0'
    if isinstance(x, int):
        return str(x)
    if math.isnan(x):
        return 'NAN'
    if math.isinf(x):
        return 'INFINITY' if x > 0 else '-INFINITY'
    return repr(float(x))


out = []


def case(op, dt, sizes, strides, fn, args=(), keepdim=0, dtype=None,
         fparam=0.0, numeric=True):
    x = make(dt, sizes, strides)
    try:
        r = fn(x)
        if isinstance(r, tuple):
            r = r[1] if op.endswith('_idx') else r[0]
        ok = 1
    except Exception as e:
        ok = 0
        msg = str(e).split('\n')[0].replace('\\', '\\\\').replace('"', '\\"')
    head = '"%s",%s,%d,%s,%s,%d,%s,%d,%d,%s,%s' % (
        op, DTC[DT.index(dt)], len(sizes), cl(sizes), cl(strides), len(args),
        cl(args), keepdim, dtype is not None,
        DTC[DT.index(dtype)] if dtype is not None else 'TC_F32', fnum(fparam))
    if not ok:
        out.append('{%s,0,"%s",TC_F32,0,{0},{0},0,0,NULL},' % (head, msg))
        return
    vals = r.contiguous().reshape(-1).tolist() if numeric else []
    if r.dtype.is_floating_point:
        vals = [float(v) for v in vals]
    arr = '(const double[]){%s}' % ','.join(fnum(v) for v in vals) \
        if vals else 'NULL'
    out.append('{%s,1,NULL,%s,%d,%s,%s,%d,%d,%s},' % (
        head, DTC[DT.index(r.dtype)], r.dim(), cl(r.shape), cl(r.stride()),
        r.storage_offset(), len(vals), arr))


F, D, L, I, B, U = (torch.float32, torch.float64, torch.int64, torch.int32,
                    torch.bool, torch.uint8)
LAY = [((3, 4), (4, 1)), ((4, 3), (1, 4)), ((2, 3, 4), (12, 4, 1)),
       ((2, 3, 4), (1, 2, 6)), ((3, 4), (8, 2)), ((1, 4), (4, 1)),
       ((3, 1, 4), (4, 4, 1)), ((4,), (1,)), ((), ()), ((0, 4), (4, 1)),
       ((2, 3, 4), (0, 4, 1)), ((2, 6), (1, 2))]

# ---- views ----
for sz, st in LAY:
    nd = len(sz)
    for perm in ([1, 0], [0, 1], [2, 0, 1], [0, 0], [0], [1, 2, 0]):
        case('permute', F, sz, st, lambda x: x.permute(*perm), perm)
    for a, b in ((0, 1), (-1, 0), (0, 2), (0, 0)):
        case('transpose', F, sz, st, lambda x: x.transpose(a, b), (a, b))
    case('t', F, sz, st, lambda x: x.t())
    for d in (0, -1, nd, nd + 1, -nd - 1):
        case('unsqueeze', F, sz, st, lambda x: x.unsqueeze(d), (d,))
    case('squeeze_all', F, sz, st, lambda x: x.squeeze())
    for ds in ((0,), (1,), (-1,), (0, 1), (5,)):
        case('squeeze', F, sz, st, lambda x: x.squeeze(ds), ds)
    for es in ((2,) + sz, (-1,) * nd, (5,) + tuple(-1 for _ in sz),
               sz[:-1] + (5,), (2, 3), (4, 3, 4), (-1, 2, 3, 4)):
        if nd == 0 and (not es or es[0] == -1):
            continue  # torch: Python arg error / numel overflow message
        case('expand', F, sz, st, lambda x: x.expand(*es), es)
    for d, i in ((0, 0), (0, 2), (-1, 1), (1, -1), (0, 5), (2, 3), (0, -4)):
        case('select', F, sz, st, lambda x: x.select(d, i), (d, i))
    for d, a, b, s in ((0, 1, 3, 1), (0, None, None, 2), (-1, -3, None, 1),
                       (1, 1, -1, 2), (0, 5, 9, 1), (0, -10, 10, 3),
                       (1, 2, 1, 1), (0, 0, 2, 0), (1, None, 3, 1)):
        case('slice', F, sz, st,
             lambda x: torch.ops.aten.slice(x, d, a, b, s),
             (d, NONE if a is None else a, NONE if b is None else b, s))
    for d, a, n in ((0, 1, 2), (0, -1, 1), (-1, 0, 0), (0, 4, 1), (0, 1, 3),
                    (0, 1, -1)):
        case('narrow', F, sz, st, lambda x: x.narrow(d, a, n), (d, a, n))
    for vs in ((-1,), (12,), (2, 6), (6, -1), (4, 3), (2, 2, 3), (1, -1, 1),
               (5, -1), (-1, -1), (3, 4), (2, 3, 4), (24,), (4, 6), (0, -1),
               (0,), (1,)):
        case('view', F, sz, st, lambda x: x.view(*vs), vs)
        case('reshape', F, sz, st, lambda x: x.reshape(*vs), vs)
    for a, b in ((0, -1), (1, 2), (0, 0), (1, 0), (-2, -1)):
        case('flatten', F, sz, st, lambda x: x.flatten(a, b), (a, b))
    for d, us in ((0, (1, -1)), (-1, (2, -1)), (1, (3, -1)), (0, (-1,))):
        if nd == 0:
            continue  # torch raises an internal error (no message)
        case('unflatten', F, sz, st, lambda x: x.unflatten(d, us),
             (d,) + us)
# int / bool views (layout only matters)
for dt in (B, L):
    case('permute', dt, (2, 3, 4), (12, 4, 1), lambda x: x.permute(2, 0, 1),
         (2, 0, 1))
    case('select', dt, (3, 4), (1, 3), lambda x: x.select(1, 2), (1, 2))

# ---- reductions ----
RED = ['sum', 'prod', 'mean', 'amax', 'amin', 'any', 'all', 'var', 'std',
       'logsumexp', 'norm1', 'norm2', 'max_all', 'min_all']


def red_fn(name, dims, keepdim, dtype, corr):
    d = None if dims is None else list(dims)
    if name in ('sum', 'prod', 'mean'):
        if name == 'prod':
            if d is not None and len(d) != 1:
                raise TypeError("skip")
            if d is None and keepdim:
                raise TypeError("skip")
            return lambda x: torch.prod(x, d[0], keepdim=keepdim,
                                        dtype=dtype) if d else \
                torch.prod(x, dtype=dtype)
        f = getattr(torch, name)
        return lambda x: f(x, d, keepdim=keepdim, dtype=dtype)
    if name in ('amax', 'amin'):
        f = getattr(torch, name)
        return lambda x: f(x, d if d is not None else [], keepdim=keepdim)
    if name in ('any', 'all'):
        # torch quirk: any(x, dim=()) reduces nothing; tcjit's ndims 0
        # means all dims, so () is not encodable here
        if (d is None and keepdim) or d == []:
            raise TypeError("skip")
        f = getattr(torch, name)
        return lambda x: f(x, tuple(d), keepdim=keepdim) if d is not None \
            else f(x)
    if name in ('var', 'std'):
        f = getattr(torch, name)
        return lambda x: f(x, d, correction=corr, keepdim=keepdim)
    if name == 'logsumexp':
        if d == []:  # torch errors on dim=() (broadcast shape mismatch)
            raise TypeError("skip")
        return lambda x: torch.logsumexp(x, d if d is not None else
                                         list(range(x.dim())), keepdim=keepdim)
    if name in ('norm1', 'norm2'):
        p = int(name[-1])
        return lambda x: torch.linalg.vector_norm(x, p, d, keepdim=keepdim,
                                                  dtype=dtype)
    if name in ('max_all', 'min_all'):
        if d is not None or keepdim:
            raise TypeError("skip")
        return lambda x: getattr(x, name[:3])()
    raise KeyError(name)


RLAY = [((3, 5), (5, 1)), ((5, 3), (1, 5)), ((2, 3, 4), (12, 4, 1)),
        ((2, 3, 4), (1, 2, 6)), ((4, 9), (18, 2)), ((), ()), ((0, 4), (4, 1)),
        ((3, 0), (1, 1)), ((1, 7), (7, 1)), ((37,), (1,)), ((3, 4), (0, 1))]
DIMS = [None, (0,), (-1,), (0, 1), (1,), (2,), (0, 0), (0, 2), ()]
for name in RED:
    for sz, st in RLAY:
        for dims in DIMS:
            for kd in (0, 1):
                for dt in (F, D, L, B, U, I):
                    if dt in (D, U, I) and (sz, st) != RLAY[0]:
                        continue
                    if dt != F and (kd or dims not in (None, (0,), (-1,))):
                        continue
                    try:
                        fn = red_fn(name, dims, bool(kd), None, 1)
                    except TypeError:
                        continue
                    case(name, dt, sz, st, fn,
                         () if dims is None else dims, kd, None, 1.0)
# dims=None vs [] differ in encoding only; dims=() is tested through DIMS.
for name in ('sum', 'prod', 'mean', 'norm2'):
    for dt, to in ((L, F), (F, D), (F, L), (B, I), (L, D)):
        try:
            fn = red_fn(name, (1,), False, to, 1)
        except TypeError:
            continue
        case(name, dt, (3, 5), (5, 1), fn, (1,), 0, to, 1.0)
for corr in (0.0, 1.0, 2.0, 5.0):
    for name in ('var', 'std'):
        case(name, F, (3, 5), (5, 1), red_fn(name, (1,), False, None, corr),
             (1,), 0, None, corr)
        case(name, D, (2, 3, 4), (1, 2, 6),
             red_fn(name, (0, 2), True, None, corr), (0, 2), 1, None, corr)
# argmax / argmin / max(dim) / min(dim)
for name in ('argmax', 'argmin', 'max_dim', 'max_dim_idx', 'min_dim',
             'min_dim_idx'):
    for sz, st in RLAY:
        for d in (None, 0, -1, 1, 2):
            for kd in (0, 1):
                for dt in (F, L, B):
                    if dt != F and (sz, st) != RLAY[0]:
                        continue
                    if name.startswith('arg'):
                        f = getattr(torch, name)
                        fn = (lambda x: f(x, d, keepdim=bool(kd)))
                    elif d is None:
                        continue
                    else:
                        f = getattr(torch, name[:3])
                        fn = (lambda x: f(x, d, keepdim=bool(kd)))
                    case(name, dt, sz, st, fn, () if d is None else (d,), kd)
# NaN / inf rows for max-like reductions
NANL = ((2, 11), (11, 1))
for name, fn in (('amax', lambda x: x.amax(1)), ('argmax',
                 lambda x: x.argmax(1)), ('logsumexp',
                 lambda x: x.logsumexp(1))):
    case(name + '_nan', F, *NANL, fn, (1,))

# ---- softmax / log_softmax / layer_norm / rms_norm ----
SLAY = [((3, 5), (5, 1)), ((5, 3), (1, 5)), ((2, 3, 4), (12, 4, 1)),
        ((2, 3, 4), (1, 2, 6)), ((), ()), ((0, 4), (4, 1)), ((4, 37), (37, 1)),
        ((2, 1), (1, 1))]
for name in ('softmax', 'log_softmax'):
    for sz, st in SLAY:
        for d in (0, -1, 1, 2):
            for dt, to in ((F, None), (D, None), (L, None), (L, F), (F, D)):
                if dt != F and (sz, st) != SLAY[0]:
                    continue
                f = getattr(torch, name)
                case(name, dt, sz, st, lambda x: f(x, d, dtype=to), (d,), 0,
                     to)
for name in ('layer_norm', 'rms_norm'):
    for sz, st in SLAY:
        for ns in ((sz[-1:]), (sz[-2:]), (3,), (5,)):
            for dt in (F, D, L):
                if dt != F and (sz, st) != SLAY[0]:
                    continue
                if name == 'layer_norm':
                    fn = (lambda x: torch.nn.functional.layer_norm(
                        x, ns, eps=1e-5))
                else:
                    fn = (lambda x: torch.nn.functional.rms_norm(x, ns))
                case(name, dt, sz, st, fn, ns, 0, None, 1e-5)
open(OUT, 'w').write('\n'.join(out) + '\n')
print(len(out))

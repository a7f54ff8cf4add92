"""Generate test_graph_cases.h / test_graph_promo.h from eager PyTorch.

Each case builds inputs with torch.empty_strided, runs the op eagerly and
records the result dtype, sizes and strides (or the error's first line).
Usage: python3 gen_test_graph_cases.py test_graph_cases.h test_graph_promo.h
"""
import torch, itertools, warnings, sys
OUT_CASES, OUT_PROMO = sys.argv[1], sys.argv[2]
warnings.filterwarnings("ignore")
DT=[torch.bool,torch.uint8,torch.int8,torch.int16,torch.int32,torch.int64,torch.float32,torch.float64]
DTC=['TC_BOOL','TC_U8','TC_I8','TC_I16','TC_I32','TC_I64','TC_F32','TC_F64']
# float16 / bfloat16 take part in the promotion table, casts and a few binary ops
HALF=[torch.float16,torch.bfloat16]
DT_ALL=DT+HALF
DTC+=['TC_F16','TC_BF16']
L=[((3,4),(4,1)),((3,4),(1,3)),((3,4),(0,1)),((3,4),(1,0)),((3,4),(8,2)),((4,),(1,)),((1,4),(4,1)),
   ((3,1),(1,1)),((1,4,3),(1,3,1)),((),()),((0,4),(4,1)),((4,0),(1,4)),((2,3,4,5),(60,1,15,3)),
   ((2,3,4,5),(60,20,5,1)),((2,1,4,5),(20,1,5,1)),((3,4),(2,6)),((2,3,2,2,2),(24,1,12,6,3)),
   ((3,4,1),(4,1,7)),((4,3),(1,4)),((3,),(0,)),((1,),(5,)),((2,3,4,5),(60,1,15,3)),((3,1,4),(1,12,3))]
def tens(dt,l):
    t=torch.empty_strided(l[0],l[1],dtype=dt)
    if dt==torch.bool: t.fill_(True)
    else: t.fill_(1)
    return t
def ctensor(dt,l):
    s=','.join(map(str,l[0])) or '0'; st=','.join(map(str,l[1])) or '0'
    return "{'t',%s,%d,{%s},{%s},0}"%(DTC[DT_ALL.index(dt)],len(l[0]),s,st)
def cscalar(v):
    if isinstance(v,bool): return "{'b',TC_BOOL,0,{0},{0},%d}"%int(v)
    if isinstance(v,int): return "{'i',TC_I64,0,{0},{0},%d}"%v
    return "{'f',TC_F64,0,{0},{0},%r}"%v
out=[]
def run(op,args,cargs,attr=None):
    try:
        if op=='to': r=args[0].to(attr)
        else: r=getattr(torch,op)(*args)
        res=('ok',r.dtype,tuple(r.shape),r.stride())
    except Exception as e:
        res=('err',str(e).split('\n')[0])
    # tcjit deviations: integer pow needs a constant exponent 0..64 on a tensor base
    if op=='pow' and res[0]=='ok' and not res[1].is_floating_point:
        e=args[1]
        if not (isinstance(e,(int,bool)) and 0<=e<=64 and isinstance(args[0],torch.Tensor)):
            res=('unsup',)
    attrc=DTC[DT_ALL.index(attr)] if attr is not None else 'TC_F32'
    ins=','.join(cargs)
    if res[0]=='ok':
        s=','.join(map(str,res[2])) or '0'; st=','.join(map(str,res[3])) or '0'
        out.append('{"%s",%d,{%s},%s,1,%s,%d,{%s},{%s},NULL},'%(op,len(args),ins,attrc,DTC[DT_ALL.index(res[1])],len(res[2]),s,st))
    elif res[0]=='err' and ("argument '" in res[1] or 'invalid combination' in res[1]):
        return
    elif res[0]=='err':
        msg=res[1].replace('\\','\\\\').replace('"','\\"')
        out.append('{"%s",%d,{%s},%s,0,TC_BOOL,0,{0},{0},"%s"},'%(op,len(args),ins,attrc,msg))
    else:
        out.append('{"%s",%d,{%s},%s,0,TC_BOOL,0,{0},{0},NULL},'%(op,len(args),ins,attrc))
un=['neg','abs','exp','log','sqrt','rsqrt','sin','cos','tanh','sigmoid','relu','logical_not','bitwise_not','square','reciprocal']
bi=['add','sub','mul','div','pow','maximum','minimum','lt','le','gt','ge','eq','ne','logical_and','logical_or','logical_xor','bitwise_and','bitwise_or','bitwise_xor','clamp_min','clamp_max']
# unary: every dtype on contiguous, every layout on f32/i64
for op in un:
    for dt in DT: run(op,[tens(dt,L[0])],[ctensor(dt,L[0])])
    for l in L[1:]:
        for dt in (torch.float32,torch.int64,torch.bool):
            run(op,[tens(dt,l)],[ctensor(dt,l)])
scal=[True,False,2,-1,0,3,0.5,2.0,-0.5,1.5]
ZERO_D_OPS=('add','sub','div','pow','lt','logical_and','bitwise_and','maximum','clamp_min')
for op in bi:
    for a in DT:
        for b in DT:
            run(op,[tens(a,L[0]),tens(b,L[0])],[ctensor(a,L[0]),ctensor(b,L[0])])
            if op not in ZERO_D_OPS: continue
            run(op,[tens(a,L[0]),tens(b,L[9])],[ctensor(a,L[0]),ctensor(b,L[9])])
            run(op,[tens(a,L[9]),tens(b,L[0])],[ctensor(a,L[9]),ctensor(b,L[0])])
            run(op,[tens(a,L[9]),tens(b,L[9])],[ctensor(a,L[9]),ctensor(b,L[9])])
        for v in scal:
            run(op,[tens(a,L[0]),v],[ctensor(a,L[0]),cscalar(v)])
            run(op,[tens(a,L[9]),v],[ctensor(a,L[9]),cscalar(v)])
            if op in ('add','mul','sub','pow','bitwise_and'):
                run(op,[v,tens(a,L[0])],[cscalar(v),ctensor(a,L[0])])
# layouts for binary
for op in ('add','clamp_min'):
    for la in L:
        for lb in L:
            run(op,[tens(torch.float32,la),tens(torch.float32,lb)],[ctensor(torch.float32,la),ctensor(torch.float32,lb)])
    for la in L:
        for v in (2,1.5):
            run(op,[tens(torch.float32,la),v],[ctensor(torch.float32,la),cscalar(v)])
            run(op,[tens(torch.int32,la),v],[ctensor(torch.int32,la),cscalar(v)])
for la in L:
    run('pow',[2,tens(torch.float32,la)],[cscalar(2),ctensor(torch.float32,la)])
    run('pow',[2.5,tens(torch.int64,la)],[cscalar(2.5),ctensor(torch.int64,la)])
# clamp
for a in DT:
    for lo,hi in ((0,1),(0.5,2),(True,False),(-1,2.5)):
        for l in (L[0],L[2],L[4],L[1]):
            run('clamp',[tens(a,l),lo,hi],[ctensor(a,l),cscalar(lo),cscalar(hi)])
    for b in DT:
        run('clamp',[tens(a,L[0]),tens(b,L[9]),tens(b,L[5])],[ctensor(a,L[0]),ctensor(b,L[9]),ctensor(b,L[5])])
for la in L:
    for lb in (L[0],L[1],L[5],L[9]):
        run('clamp',[tens(torch.float32,la),tens(torch.float32,lb),tens(torch.float32,L[9])],[ctensor(torch.float32,la),ctensor(torch.float32,lb),ctensor(torch.float32,L[9])])
# where
for c in (torch.bool,torch.float32):
    for a in DT:
        for b in DT:
            run('where',[tens(c,L[0]),tens(a,L[1]),tens(b,L[5])],[ctensor(c,L[0]),ctensor(a,L[1]),ctensor(b,L[5])])
        for v in (0,1.5,True):
            run('where',[tens(c,L[1]),tens(a,L[2]),v],[ctensor(c,L[1]),ctensor(a,L[2]),cscalar(v)])
for lc in L:
    for la in (L[0],L[1],L[2],L[9]):
        run('where',[tens(torch.bool,lc),tens(torch.int64,la),tens(torch.float32,L[4])],[ctensor(torch.bool,lc),ctensor(torch.int64,la),ctensor(torch.float32,L[4])])
# to
for a in DT:
    for b in DT:
        for l in (L if a in (torch.float32,torch.int64) else L[:3]):
            run('to',[tens(a,l)],[ctensor(a,l)],attr=b)
# reduced floats: casts, and binary ops with every dtype and Python scalars
for a in DT_ALL:
    for b in DT_ALL:
        if a not in HALF and b not in HALF: continue
        for l in L[:3]:
            run('to',[tens(a,l)],[ctensor(a,l)],attr=b)
        for op in ('add','mul','div','lt','maximum','pow'):
            run(op,[tens(a,L[0]),tens(b,L[0])],[ctensor(a,L[0]),ctensor(b,L[0])])
            run(op,[tens(a,L[0]),tens(b,L[9])],[ctensor(a,L[0]),ctensor(b,L[9])])
            run(op,[tens(a,L[9]),tens(b,L[1])],[ctensor(a,L[9]),ctensor(b,L[1])])
for a in HALF:
    for op in un+bi[:7]:
        args=[tens(a,L[4])]+([tens(a,L[1])] if op in bi else [])
        run(op,args,[ctensor(a,L[4])]+([ctensor(a,L[1])] if op in bi else []))
    for op in ('add','mul','sub','div','pow','lt','clamp_min'):
        for v in scal:
            run(op,[tens(a,L[0]),v],[ctensor(a,L[0]),cscalar(v)])
            run(op,[tens(a,L[9]),v],[ctensor(a,L[9]),cscalar(v)])
open(OUT_CASES,'w').write('\n'.join(out)+'\n')
print(len(out))
# promotion table
dims=['dim','zero','wrapped']
pro=[]
def mk(kind,dt):
    if kind=='dim': return tens(dt,L[5]),'{1,%s}'%DTC[DT_ALL.index(dt)]
    if kind=='zero': return tens(dt,L[9]),'{0,%s}'%DTC[DT_ALL.index(dt)]
    v={torch.bool:True,torch.int64:3,torch.float64:1.5}[dt]
    return v,'{2,%s}'%DTC[DT_ALL.index(dt)]
for ka in dims:
    for kb in dims:
        for a in DT_ALL if ka!='wrapped' else (torch.bool,torch.int64,torch.float64):
            for b in DT_ALL if kb!='wrapped' else (torch.bool,torch.int64,torch.float64):
                if ka=='wrapped' and kb=='wrapped': continue
                x,cx=mk(ka,a); y,cy=mk(kb,b)
                r=torch.result_type(x,y)
                pro.append('{%s,%s,%s},'%(cx,cy,DTC[DT_ALL.index(r)]))
open(OUT_PROMO,'w').write('\n'.join(pro)+'\n')
print(len(pro))

"""nanoGPT 124M train step on the GPU: per step (eager/tcjit/torch.compile in one
process), CPU enqueue vs device time, and the top device kernels per impl."""
import os, sys, time, tempfile
os.environ.setdefault("TCJIT_CACHE_DIR", tempfile.mkdtemp())
import torch, tcjit
sys.path.insert(0, "tests"); sys.path.insert(0, "bench")
from test_models import GPT
from torch.profiler import profile, ProfilerActivity
B, T, L, E, V = 8, 512, 12, 768, 50304
impls = sys.argv[1].split(",") if len(sys.argv) > 1 else ["eager", "tcjit", "inductor"]
def make(wrap):
    torch.manual_seed(0)
    model = GPT(L, V, T, E).cuda().eval()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run, ostep = wrap(model), wrap(opt.step)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, V, (B, T), generator=g).cuda(); tgt = torch.randint(0, V, (B, T), generator=g).cuda()
    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = run(idx, tgt); loss.backward(); ostep(); return loss.detach()
    return step
wraps = {"eager": lambda f: f, "tcjit": tcjit.compile, "inductor": torch.compile}
steps, losses = {}, {}
for nm in impls:
    s = make(wraps[nm]); torch.cuda.synchronize(); t0 = time.perf_counter(); l = s(); torch.cuda.synchronize()
    t1 = time.perf_counter(); l2 = s(); torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"{nm:9s} first {t1-t0:7.2f} s  second {t2-t1:7.2f} s  loss {l.item():.6f} {l2.item():.6f}", flush=True)
    steps[nm] = s
    if nm == "tcjit": print(tcjit.counters())
for rnd in range(2):
    for nm, s in steps.items():
        for _ in range(3): s()
        torch.cuda.synchronize()
        cpu, wall = [], []
        for _ in range(10):
            torch.cuda.synchronize(); t0 = time.perf_counter(); s(); t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
            cpu.append(t1 - t0); wall.append(t2 - t0)
        cpu.sort(); wall.sort()
        print(f"round {rnd} {nm:9s} step wall {wall[5]*1e3:7.2f} ms (min {wall[0]*1e3:7.2f})  cpu-enqueue {cpu[5]*1e3:7.2f} ms", flush=True)
for nm, s in steps.items():
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        s(); torch.cuda.synchronize()
    ka = p.key_averages()
    dev = sum(e.self_device_time_total for e in ka) / 1e3
    nk = sum(e.count for e in ka if e.self_device_time_total > 0)
    print(f"=== {nm}: device {dev:.2f} ms, {nk} device events")
    print(ka.table(sort_by="self_device_time_total", row_limit=22, max_name_column_width=70))
    if nm in ("tcjit", "inductor"):
        tot = {}
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t = tot.setdefault(e.name, [0, 0]); t[0] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total; t[1] += 1
        for k, (t, c) in sorted(tot.items(), key=lambda kv: -kv[1][0])[:45]:
            if "gemm" not in k and "fmha" not in k:
                print(f"  {t/1e3:8.3f} ms {c:4d}x  {k[:110]}")
    if "--cpu" in sys.argv:
        print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))

// The phase clock's stamps (daskgb/phases.py, CudaPhaseClock): the device's nanosecond timer
// written in stream order by a one-thread kernel. A kernel, not a CUDA event: a stream capture
// records a kernel into the graph, so a replayed round is still timed phase by phase (an event
// recorded while capturing only orders the graph's work).
extern "C" __global__ void stamp_clock(unsigned long long* stamps, int slot) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  stamps[slot] = now;
}

# gnuplot bench/results/2026-11-23-h100/h100-w8.gp (from the repository root):
# keys/s against filter size, gbf and cuco (2024-10, default policy) and the bounds,
# from h100-w8.dat (extracted from h100-w8.json).
set terminal png size 1000,620
set output 'bench/results/2026-11-23-h100/h100-w8.png'
set title 'NVIDIA H100 80GB HBM3: u64 keys, W=8 k=8, fpp 1%, 10^8-key batches on the device'
set logscale x 2
set logscale y 10
set xlabel 'filter size (MiB); L2 = 50 MiB'
set ylabel 'G keys/s (bounds: G lookups or blocks/s)'
set key outside right
set grid
d = 'bench/results/2026-11-23-h100/h100-w8.dat'
plot d u 1:4 w lp lw 2 dt 2 t 'bound: random 32 B sector reads', \
     d u 1:2 w lp lw 2 t 'gbf contains', \
     d u 1:3 w lp lw 2 t 'cuco contains (FPR 5-29%)', \
     d u 1:7 w lp lw 2 dt 2 t 'bound: 8 REDs/block, thread per block', \
     d u 1:5 w lp lw 2 t 'gbf add (thread per key)', \
     d u 1:6 w lp lw 2 t 'cuco add (8 lanes per key)'

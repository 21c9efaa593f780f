# docs/scaling-fpr.png from bench/results/scaling_growth_cpu_8x8.tsv (the
# output of gbf_scaling_growth; its first table: rows 1..15 after the header).
#   gnuplot bench/scaling_plot.gp
set terminal pngcairo size 900,540 font "sans,11"
set output "docs/scaling-fpr.png"
set datafile separator "\t"
set logscale x
set logscale y
set xlabel "keys inserted (distinct)"
set ylabel "false-positive rate on 10^7 absent keys"
set title "Scaling chain (initial 1,000, fpp 1%, expansion 2, r 0.5, layout 8/8) vs a plain filter sized for 1,000"
set key bottom right
set grid
set yrange [0.001:1.5]
data = "bench/results/scaling_growth_cpu_8x8.tsv"
plot data every ::1::15 using 1:4 with linespoints lw 2 title "scaling chain, measured", \
     data every ::1::15 using 1:5 with lines dt 2 lw 2 title "scaling chain, model (compound FPR)", \
     data every ::1::15 using 1:6 with linespoints lw 2 title "plain filter sized for 1,000, measured", \
     0.01 with lines lc rgb "black" dt 3 title "target 1%"

# gnuplot docs/join-prefilter/plot.gp (run from docs/join-prefilter): speedup.png from results.tsv
set terminal pngcairo size 900,500 font ",11"
set output "speedup.png"
set title "gbf join: end-to-end speedup of the filter prefilter (CPU, 2 cores, fpp 0.01)"
set xlabel "selectivity of the orders predicate"
set ylabel "speedup = baseline join / (build + prefilter + join)"
set logscale x
set xtics ("1%%" 0.01, "5%%" 0.05, "25%%" 0.25, "100%%" 1)
set xrange [0.007:1.4]
set yrange [0:*]
set grid
set key top right
set arrow from 0.007,1 to 1.4,1 nohead dt 2 lc rgb "gray"
plot "results.tsv" using ($1==1 ? $2 : 1/0):14 every ::1 with linespoints lw 2 pt 7 title "SF 1 (6M lineitem rows)", \
     "results.tsv" using ($1==10 ? $2 : 1/0):14 every ::1 with linespoints lw 2 pt 5 title "SF 10 (60M lineitem rows)"

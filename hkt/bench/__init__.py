"""Benchmarks: each prints a Markdown table and writes CSV + Markdown under results/bench/."""

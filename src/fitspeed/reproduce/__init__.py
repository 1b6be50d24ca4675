"""`fitspeed reproduce`: the five articles' experiments as commands, with accuracy, beside the articles' figures.

Layer 5, between report and cli. Runs in the parent and never imports a
framework: every configuration is a trial child (`fitspeed.measure.runner`),
in `train`, `time`, `compute` or `predict` mode, with `validate` for held-out
accuracy. It may import core, machine, measure and report (charts and the
HTML section are drawn there); cli prints its tables.

- `data`: which data a reproduction trains on (a data set when present, else
  learnable class templates in its shape), written once as an .npz or a folder.
- `experiment`: the types (`Plan`, `Row`), the engine that runs a plan's rows
  interleaved over seeds, and the summary every table, chart and page reads.
- `articles`: the five plans, with each article's own figures.
- `output`: results.json, the Markdown table, the chart and the HTML page.
"""

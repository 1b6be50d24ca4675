"""What people read: the HTML report, its plots, and the monitor's plot.

`plot_data` computes plain data for every plot from a study summary (pure);
`plots`, `monitor_plot` and `scale` only draw (matplotlib, imported lazily);
`html` renders `templates/report.html`; `numbers` writes figures for people
(shared with the terminal tables).

May import: every layer before it (`core`, `machine`, `measure`, `search`),
jinja2 and matplotlib. matplotlib appears in this layer only.
"""

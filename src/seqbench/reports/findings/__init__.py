"""The texts' claims about recurrence and attention, each answered from the ledger's records.

`python -m seqbench.reports.findings` writes `experiments/findings.md` and the summary table between the
`<!-- findings-summary -->` markers of README.md. Each claim is one module here that reads its
records through `seqbench.reports.ledger` and returns a `Claim`: the measured answer with its conditions,
the figure, a verdict, the confidence and what would change it. Every number on the page is a
`ledger.Number`, printed as a link to the file it came from; where no record answers, the claim
says "not measured" and names the run that would. Nothing on the page is typed by hand, so a new
record changes the page the next time the generator runs, and a test fails until it does.
"""

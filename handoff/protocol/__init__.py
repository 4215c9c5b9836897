"""What passes between the roles, and how it is checked: the plan, the briefs, the reports and
their frontmatter, the role contracts, the validators of a report's claims, and how a report is
handed over (intake) and judged (submission)."""

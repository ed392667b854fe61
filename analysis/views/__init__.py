"""promcp.analysis.views — what turns computed tables into something a person reads.

``promcp.analysis.views.html`` writes the self-contained HTML report (``promcp report DATASET --html OUT``).
"""

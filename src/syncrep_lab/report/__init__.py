"""The report: everything a run stored, as one self-contained HTML page
(``data`` gathers the data, ``charts`` specifies the plots, ``html`` renders)."""

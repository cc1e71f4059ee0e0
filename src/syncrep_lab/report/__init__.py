"""The report: everything a run stored, as one self-contained HTML page
(``model`` gathers the data, ``charts`` specifies the plots, ``html`` renders)."""

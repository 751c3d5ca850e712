"""`sagemaker-tfs tune`: the settings that serve a model fastest on this machine, found by measuring.

settings_space: the candidate settings (the container's own variables, ranges from the core count); search: a
seeded hill climb over them; load: the load generators (wrk, h2load or Python; closed loop and a Poisson open
loop); usage: the /proc readings of the stack's processes; stack: one stack per setting; trial: a setting's
measurements and score; report: the table, the winner's files and the HTML page; endpoint: `tune endpoint`.

`tune transform`: transform_sample (a prefix of the input), transform_job (the job's fields as dimensions, real
local transform jobs against kept stacks), transform_tuner (the search, the budget and the recheck),
transform_report (its table, request and page, on report.py's parts), transform_command (the command).
"""

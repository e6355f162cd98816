"""The comparisons with Triton's Model Analyzer: running it (`model_analyzer`), our search against its pick on one
model (`search`, with both winners re-measured in turns by `head_to_head`), and a deployment of several models
planned both ways and judged under mixed traffic (`deployment`, `deployment_types`, `deployment_report`)."""

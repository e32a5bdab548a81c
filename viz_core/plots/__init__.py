"""Plotly figure builders: plain data in (numpy arrays, token strings, label strings), go.Figure out.

Builders never see a model and never translate: pages pass already-translated labels.
"""

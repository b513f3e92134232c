"""A cross-vendor panel (``prun panel``): the same question under the same structured
contract to several Claude, Gemini and Antigravity units, then a cross-check of their answers.

``contract`` owns the question, the schema, what a panelist is told and how an answer is read
and validated; ``build`` makes the panel's plan (one read-only packet per panelist on a fixed
executor); ``drive`` runs it as an ordinary run with one follow-up for an invalid answer;
``answers`` reads each panelist's attempts back and keeps the evidence; ``crosscheck`` groups
the valid answers field by field; ``report`` is the finished panel as lines and JSON.
"""

"""Whole networks on one machine: run scenarios, summarise and plot them."""

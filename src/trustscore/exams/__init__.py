"""Exam sets (versioned data files), their loader, and the signed exam report. See docs/exams.md."""

from signoff_proposals.app import serve

serve()
